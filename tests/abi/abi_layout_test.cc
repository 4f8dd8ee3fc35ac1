// The ABI seen from C++: the pinned layout (abi_layout.h, compile time), the initialiser
// macros and inline helpers (run time), and agreement with what the C compiler computed
// for the same headers (c_*.c, compiled as C11 into this binary).
#include "abi_layout.h"

#include <gtest/gtest.h>
#include <procgroup/procgroup.h>
#include <procgroup/procgroup_backend.h>

#include <cstring>
#include <map>
#include <string>
#include <type_traits>

#include "abi_c_checks.h"

int abi_cxx_procgroup_alone();
int abi_cxx_backend_alone();
int abi_cxx_backend_then_user();

namespace {

TEST(AbiLayout, CTranslationUnitsPassTheirChecks) {
  EXPECT_EQ(abi_c_procgroup_alone(), 0);
  EXPECT_EQ(abi_c_backend_alone(), 0);
  EXPECT_EQ(abi_c_user_then_backend(), 0);
  EXPECT_EQ(abi_c_backend_then_user(), 0);
}

TEST(AbiLayout, Cxx11TranslationUnitsPassTheirChecks) {
  EXPECT_EQ(abi_cxx_procgroup_alone(), 0);
  EXPECT_EQ(abi_cxx_backend_alone(), 0);
  EXPECT_EQ(abi_cxx_backend_then_user(), 0);
}

// Holds on every platform, including those the static pins skip.
TEST(AbiLayout, CAndCxxAgreeOnEveryStructSize) {
  const std::map<std::string, size_t> cxx = {
      {"pg_buffer_t", sizeof(pg_buffer_t)},
      {"pg_group_options_t", sizeof(pg_group_options_t)},
      {"pg_op_options_t", sizeof(pg_op_options_t)},
      {"pg_capabilities_t", sizeof(pg_capabilities_t)},
      {"pg_host_services_t", sizeof(pg_host_services_t)},
      {"pg_host_store_t", sizeof(pg_host_store_t)},
      {"pg_backend_group_config_t", sizeof(pg_backend_group_config_t)},
      {"pg_backend_op_t", sizeof(pg_backend_op_t)},
      {"pg_backend_ops_t", sizeof(pg_backend_ops_t)},
      {"pg_backend_negotiate_in_t", sizeof(pg_backend_negotiate_in_t)},
      {"pg_backend_negotiate_out_t", sizeof(pg_backend_negotiate_out_t)},
  };
  size_t count = 0;
  const abi_c_size_t* c = abi_c_sizes(&count);
  ASSERT_EQ(count, cxx.size());
  for (size_t i = 0; i < count; ++i) {
    auto it = cxx.find(c[i].type);
    ASSERT_NE(it, cxx.end()) << c[i].type;
    EXPECT_EQ(c[i].size, it->second) << c[i].type;
  }
}

TEST(AbiLayout, InitMacrosSetStructSizeAndZeroEverythingElse) {
  const pg_group_options_t group = PG_GROUP_OPTIONS_INIT;
  pg_group_options_t zero_group{};
  zero_group.struct_size = sizeof(pg_group_options_t);
  EXPECT_EQ(std::memcmp(&group, &zero_group, sizeof(group)), 0);

  const pg_op_options_t op = PG_OP_OPTIONS_INIT;
  pg_op_options_t zero_op{};
  zero_op.struct_size = sizeof(pg_op_options_t);
  EXPECT_EQ(std::memcmp(&op, &zero_op, sizeof(op)), 0);

  const pg_capabilities_t caps = PG_CAPABILITIES_INIT;
  EXPECT_EQ(caps.struct_size, sizeof(pg_capabilities_t));
  EXPECT_EQ(caps.native_ops | caps.native_dtypes | caps.native_reduce_ops | caps.devices, 0u);

  const pg_buffer_t buffer = PG_BUFFER_INIT;
  EXPECT_EQ(buffer.struct_size, sizeof(pg_buffer_t));
  EXPECT_EQ(buffer.dtype, PG_DTYPE_INVALID);
  EXPECT_EQ(buffer.device_type, PG_DEVICE_CPU);
}

TEST(AbiLayout, BufferCpuFillsACpuBuffer) {
  double data[5] = {};
  const pg_buffer_t b = pg_buffer_cpu(data, 5, PG_DTYPE_F64);
  EXPECT_EQ(b.struct_size, sizeof(pg_buffer_t));
  EXPECT_EQ(b.data, data);
  EXPECT_EQ(b.count, 5u);
  EXPECT_EQ(b.dtype, PG_DTYPE_F64);
  EXPECT_EQ(b.device_type, PG_DEVICE_CPU);
  EXPECT_EQ(b.device_index, 0);
  EXPECT_EQ(b.stream, nullptr);
}

TEST(AbiLayout, NegotiateSymbolNameMatchesTheDeclaredFunction) {
  EXPECT_STREQ(PG_BACKEND_NEGOTIATE_SYMBOL, "pg_backend_negotiate");
  // The declaration and the typedef must describe the same function (unevaluated: no
  // plugin is linked here).
  static_assert(std::is_same_v<decltype(&pg_backend_negotiate), pg_backend_negotiate_fn>);
}

}  // namespace
