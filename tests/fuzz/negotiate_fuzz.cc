// libFuzzer target: check_negotiation, the core's validator of a plugin's answer to
// pg_backend_negotiate, given a fuzzed answer: version, name bytes, description, capability
// masks and a function table of fuzzed size and contents (its entries are only compared
// with NULL, never called). A plugin's table must be as large as its struct_size says, so
// the table buffer is exactly that large: reading past it is a bug the address sanitizer
// reports. Accepted answers must satisfy what the core then relies on.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "loader/negotiate_check.h"

namespace {

using namespace procgroup::detail;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "negotiate_fuzz: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  pg_backend_negotiate_out_t out{};
  out.struct_size = sizeof(out);
  out.version = in.ConsumeIntegralInRange<uint32_t>(0, 4);
  out.native_ops = in.ConsumeIntegral<uint32_t>();
  out.native_dtypes = in.ConsumeIntegral<uint32_t>();
  out.native_reduce_ops = in.ConsumeIntegral<uint32_t>();
  out.devices = in.ConsumeIntegral<uint32_t>();
  // The validator reads at most kMaxBackendNameLength + 1 bytes of the name.
  std::vector<char> name(kMaxBackendNameLength + 1, '\0');
  const std::string name_bytes = in.ConsumeRandomLengthString(kMaxBackendNameLength + 1);
  std::memcpy(name.data(), name_bytes.data(), name_bytes.size());
  std::string description = in.ConsumeRandomLengthString(80);
  const uint8_t present = in.ConsumeIntegral<uint8_t>();
  out.name = (present & 1) ? name.data() : nullptr;
  out.description = (present & 2) ? description.c_str() : nullptr;
  const size_t table_size = in.ConsumeIntegralInRange<size_t>(0, sizeof(pg_backend_ops_t) + 64);
  std::vector<uint8_t> table(table_size == 0 ? 1 : table_size);
  const std::vector<uint8_t> bytes = in.ConsumeBytes<uint8_t>(table.size());
  std::memcpy(table.data(), bytes.data(), bytes.size());
  if (table_size >= sizeof(uint32_t)) {
    const auto claimed = static_cast<uint32_t>(table_size);
    std::memcpy(table.data(), &claimed, sizeof(claimed));  // struct_size tells the truth
  }
  out.ops = (present & 4) && table_size >= sizeof(uint32_t)
                ? reinterpret_cast<const pg_backend_ops_t*>(table.data())
                : nullptr;
  const uint32_t lo = in.ConsumeIntegralInRange<uint32_t>(0, 3);
  const uint32_t hi = in.ConsumeIntegralInRange<uint32_t>(0, 3);

  Result<NegotiatedBackend> r = check_negotiation(out, lo, hi);
  if (!r.ok()) {
    const pg_status_t code = r.status().code();
    if (code != PG_ERR_ABI_MISMATCH && code != PG_ERR_BACKEND) fail("unexpected status");
    if (r.status().message().empty()) fail("a rejection without a reason");
    return 0;
  }
  const NegotiatedBackend& b = r.value();
  if (b.version < lo || b.version > hi) fail("version outside the range");
  if (!is_valid_backend_name(b.name)) fail("invalid name accepted");
  if (b.ops == nullptr || b.ops->struct_size < PG_BACKEND_OPS_V1_SIZE) fail("table too small");
  if (b.ops->struct_size < PG_BACKEND_OPS_SPLIT_SIZE && b.group_split != nullptr)
    fail("group_split taken from a table too short to hold it");
  if ((b.native_ops & ~kKnownOpsMask) || (b.native_dtypes & ~kKnownDtypesMask) ||
      (b.native_reduce_ops & ~kKnownReduceOpsMask) || (b.devices & ~kKnownDevicesMask)) {
    fail("unknown capability bits kept");
  }
  if (b.description.size() > 1024) fail("description not bounded");
  if (out.description != nullptr && b.description != std::string(out.description).substr(0, 1024)) {
    fail("description not kept");
  }
  return 0;
}
