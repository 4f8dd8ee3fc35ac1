// The nccl plugin's table driven directly (no libprocgroup): what it negotiates, and how it
// refuses what it cannot take, on any host. On a host without a CUDA device (CI), creating
// a group fails promptly with PG_ERR_UNSUPPORTED and "no CUDA device: <CUDA's error>".
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "direct_harness.h"
#include "nccl_test_support.h"

namespace procgroup::nccl_test {
namespace {

using direct::Plugin;

const Plugin& plugin() {
  static Plugin p(PG_NCCL_PATH);
  return p;
}

pg_buffer_t buffer(void* data, uint64_t count, pg_dtype_t dtype, int32_t device_type) {
  return {sizeof(pg_buffer_t), dtype, data, count, device_type, 0, nullptr};
}

TEST(NcclInterface, NegotiatesCudaOnlyWithEveryOpNative) {
  ASSERT_EQ(plugin().status(), PG_OK) << plugin().error();
  const pg_backend_negotiate_out_t& info = plugin().info();
  EXPECT_EQ(info.version, 1u);
  EXPECT_STREQ(info.name, "nccl");
  ASSERT_NE(info.description, nullptr);
  EXPECT_NE(std::string(info.description).find("NCCL 2."), std::string::npos) << info.description;
  EXPECT_EQ(info.devices, 1u << PG_DEVICE_CUDA);
  EXPECT_EQ(info.native_ops, (1u << PG_OP_COUNT_) - 1);
  EXPECT_EQ(info.native_dtypes, ((1u << PG_DTYPE_COUNT_) - 1) & ~1u);
  EXPECT_EQ(info.native_reduce_ops, (1u << PG_REDUCE_COUNT_) - 1);
  const pg_backend_ops_t& ops = plugin().ops();
  EXPECT_GE(ops.struct_size, PG_BACKEND_OPS_V1_SIZE);
  EXPECT_NE(ops.group_create, nullptr);
  EXPECT_NE(ops.group_destroy, nullptr);
  EXPECT_NE(ops.group_abort, nullptr);
  EXPECT_NE(ops.work_test, nullptr);
  EXPECT_NE(ops.work_wait, nullptr);
  EXPECT_NE(ops.work_release, nullptr);
  for (int op = 0; op < PG_OP_COUNT_; ++op)
    EXPECT_NE(direct::entry(ops, static_cast<pg_op_t>(op)), nullptr) << "op " << op;
  // Subgroups come from ncclCommSplit, through the optional entry.
  EXPECT_GE(ops.struct_size, PG_BACKEND_OPS_SPLIT_SIZE);
  EXPECT_NE(ops.group_split, nullptr);
}

TEST(NcclInterface, RefusesInterfaceVersionsItDoesNotSpeak) {
  pg_backend_negotiate_in_t in = {sizeof(in), 2, 3, 0, direct::test_host()};
  pg_backend_negotiate_out_t out{};
  out.struct_size = sizeof(out);
  EXPECT_EQ(plugin().negotiate()(&in, &out), PG_ERR_ABI_MISMATCH);
  EXPECT_NE(direct::take_error().find("version 1"), std::string::npos);
  EXPECT_EQ(out.ops, nullptr);
}

TEST(NcclInterface, GroupCreateWithoutDeviceFailsPromptlyOnEveryRank) {
  std::string why;
  if (cuda_device_count(&why) > 0) GTEST_SKIP() << "this host has a CUDA device";
  for (int size : {1, 2}) {
    const auto start = std::chrono::steady_clock::now();
    direct::World world(plugin(), size, {.timeout_ms = 60000});
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 10.0) << "size " << size;
    for (int r = 0; r < size; ++r) {
      EXPECT_EQ(world.create_status(r), PG_ERR_UNSUPPORTED) << "size " << size << " rank " << r;
      EXPECT_NE(world.create_error(r).find("no CUDA device: "), std::string::npos)
          << world.create_error(r);
      // CUDA's own error follows ("cudaErrorNoDevice", "cudaErrorInsufficientDriver", ...).
      EXPECT_NE(world.create_error(r).find("cudaError"), std::string::npos)
          << world.create_error(r);
      EXPECT_EQ(world.group(r), nullptr);
    }
  }
}

// Buffers the plugin cannot take are refused by Group::submit before the communicator is
// used (check_buffer_kinds): nccl_plan_test checks them, as a group needs a device here.

TEST(NcclInterface, NullArgumentsAreInvalid) {
  const pg_backend_ops_t& ops = plugin().ops();
  pg_backend_group_t group = nullptr;
  EXPECT_EQ(ops.group_create(nullptr, &group), PG_ERR_INVALID_ARGUMENT);
  EXPECT_NE(direct::take_error().find("config is NULL"), std::string::npos);
  pg_backend_group_config_t config{};
  config.struct_size = sizeof(config);
  config.size = 1;
  config.timeout_ms = 1000;
  config.group_id = "g";
  EXPECT_EQ(ops.group_create(&config, nullptr), PG_ERR_INVALID_ARGUMENT);
  EXPECT_NE(direct::take_error().find("out is NULL"), std::string::npos);
  EXPECT_EQ(ops.group_create(&config, &group), PG_ERR_INVALID_ARGUMENT);  // no store
  EXPECT_NE(direct::take_error().find("store"), std::string::npos);
  config.size = 0;
  EXPECT_EQ(ops.group_create(&config, &group), PG_ERR_INVALID_ARGUMENT);
  EXPECT_NE(direct::take_error().find("of size 0"), std::string::npos);
  EXPECT_EQ(group, nullptr);

  EXPECT_EQ(ops.group_destroy(nullptr), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ops.group_abort(nullptr), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ops.work_test(nullptr), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ops.work_wait(nullptr, 10), PG_ERR_INVALID_ARGUMENT);
  EXPECT_NE(direct::take_error().find("work is NULL"), std::string::npos);
  ops.work_release(nullptr);  // a no-op, like free(NULL)

  float x = 0;
  const pg_buffer_t b = buffer(&x, 1, PG_DTYPE_F32, PG_DEVICE_CUDA);
  pg_backend_op_t o = direct::op(PG_OP_ALLREDUCE, b, b);
  pg_backend_work_t w = nullptr;
  EXPECT_EQ(ops.allreduce(nullptr, &o, &w), PG_ERR_INVALID_ARGUMENT);
  EXPECT_NE(direct::take_error().find("must not be NULL"), std::string::npos);
  EXPECT_EQ(w, nullptr);
}

// group_split without a parent is refused by the kit; the rest of its argument checks
// (color, the config) run in Group::split on a live parent, so only on a GPU.
TEST(NcclInterface, SplitRefusesANullParent) {
  const pg_backend_ops_t& ops = plugin().ops();
  ASSERT_NE(ops.group_split, nullptr);
  pg_backend_group_config_t config{};
  config.struct_size = sizeof(config);
  pg_backend_group_t child = nullptr;
  EXPECT_EQ(ops.group_split(nullptr, 0, 0, &config, &child), PG_ERR_INVALID_ARGUMENT);
  EXPECT_NE(direct::take_error().find("NULL"), std::string::npos);
  EXPECT_EQ(child, nullptr);
}

}  // namespace
}  // namespace procgroup::nccl_test
