// Validation of a plugin's answer to pg_backend_negotiate, kept pure (no I/O, no logging,
// no global state) so it can be unit-tested and fuzzed on its own: it reads the out
// struct, the name string (at most kMaxBackendNameLength + 1 bytes) and the function
// table (never beyond ops->struct_size), and returns either the cleaned result or the
// reason for rejecting the plugin.
//
//   Result<NegotiatedBackend> r = check_negotiation(out, kMinBackendInterface,
//                                                   kMaxBackendInterface);
//   if (!r.ok()) reject(path, r.status());  // PG_ERR_ABI_MISMATCH or PG_ERR_BACKEND
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "procgroup/procgroup_backend.h"

namespace procgroup::detail {

inline constexpr size_t kMaxBackendNameLength = 64;

// The capability bits this core knows; anything else is masked off. Bit 0 of the dtype
// mask would be PG_DTYPE_INVALID, which no backend can support.
inline constexpr uint32_t kKnownOpsMask = (1u << PG_OP_COUNT_) - 1;
inline constexpr uint32_t kKnownDtypesMask = ((1u << PG_DTYPE_COUNT_) - 1) & ~1u;
inline constexpr uint32_t kKnownReduceOpsMask = (1u << PG_REDUCE_COUNT_) - 1;
inline constexpr uint32_t kKnownDevicesMask = (1u << PG_DEVICE_COUNT_) - 1;

// What the core keeps of a successful negotiation.
struct NegotiatedBackend {
  uint32_t version = 0;
  std::string name;
  std::string description;  // "" when the plugin gave none
  // Masked to the known bits; native_ops also to the entries the table really has.
  uint32_t native_ops = 0;
  uint32_t native_dtypes = 0;
  uint32_t native_reduce_ops = 0;
  uint32_t devices = 0;
  const pg_backend_ops_t* ops = nullptr;
  // ops->group_split when the table reaches PG_BACKEND_OPS_SPLIT_SIZE, else NULL: the core
  // takes it from here, so nothing reads past a shorter (version-1) table.
  pg_backend_split_fn group_split = nullptr;
  // Likewise ops->work_on_complete (PG_BACKEND_OPS_ON_COMPLETE_SIZE).
  pg_backend_on_complete_fn work_on_complete = nullptr;
  // One line per adjustment (bits masked off), for the caller to log.
  std::vector<std::string> warnings;
};

// [a-z0-9_]+, at most kMaxBackendNameLength characters: safe in a file name, a log line
// and an environment variable.
bool is_valid_backend_name(std::string_view name);

// text with every byte outside printable ASCII replaced by '?': names and values from a
// broken plugin or a user's typo go into messages without control characters.
std::string printable(std::string_view text);

// Checks, in order: version within [min_version, max_version] (else PG_ERR_ABI_MISMATCH);
// name non-NULL and valid; ops non-NULL; ops->struct_size >= PG_BACKEND_OPS_V1_SIZE (else
// PG_ERR_ABI_MISMATCH); group_create, group_destroy, group_abort, work_test, work_wait
// and work_release non-NULL; send and recv both present, or every collective present
// (else the core could not emulate what is missing). Other failures: PG_ERR_BACKEND.
// Tables of PG_BACKEND_OPS_V1_SIZE and longer are accepted; the optional group_split and
// work_on_complete are read only when struct_size covers them.
// The message is the reason alone; the caller adds the file name.
Result<NegotiatedBackend> check_negotiation(const pg_backend_negotiate_out_t& out,
                                            uint32_t min_version, uint32_t max_version);

}  // namespace procgroup::detail
