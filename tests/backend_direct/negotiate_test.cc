// pg_backend_negotiate of both plugins: version ranges, struct sizes, capability masks and
// the function table (full for loopback, send/recv only for loopback_p2p).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "direct_harness.h"

namespace procgroup::direct {
namespace {

using ::testing::HasSubstr;

pg_backend_negotiate_in_t input(uint32_t min_version, uint32_t max_version) {
  return {sizeof(pg_backend_negotiate_in_t), min_version, max_version, 0, test_host()};
}

constexpr uint32_t kAllOps = (1u << PG_OP_COUNT_) - 1;

TEST(Negotiate, AcceptsRangesContainingVersionOne) {
  Plugin plugin(PG_LOOPBACK_PATH);
  for (auto [lo, hi] : std::vector<std::pair<uint32_t, uint32_t>>{{1, 1}, {0, 1}, {1, 7}}) {
    pg_backend_negotiate_in_t in = input(lo, hi);
    pg_backend_negotiate_out_t out{};
    out.struct_size = sizeof(out);
    ASSERT_EQ(plugin.negotiate()(&in, &out), PG_OK) << lo << ".." << hi;
    EXPECT_EQ(out.version, 1u);
    EXPECT_STREQ(out.name, "loopback");
    EXPECT_NE(std::strlen(out.description), 0u);
    EXPECT_EQ(out.native_ops, kAllOps);
    for (int d = PG_DTYPE_F32; d < PG_DTYPE_COUNT_; ++d) EXPECT_TRUE(out.native_dtypes >> d & 1);
    EXPECT_FALSE(out.native_dtypes & 1u << PG_DTYPE_INVALID);
    EXPECT_EQ(out.native_reduce_ops, (1u << PG_REDUCE_COUNT_) - 1);  // AVG included
    EXPECT_EQ(out.devices, 1u << PG_DEVICE_CPU);
    ASSERT_NE(out.ops, nullptr);
    EXPECT_GE(out.ops->struct_size, PG_BACKEND_OPS_V1_SIZE);
    for (int o = 0; o < PG_OP_COUNT_; ++o) EXPECT_NE(entry(*out.ops, o), nullptr) << o;
  }
}

TEST(Negotiate, RefusesRangesWithoutVersionOne) {
  Plugin plugin(PG_LOOPBACK_PATH);
  for (auto [lo, hi] : std::vector<std::pair<uint32_t, uint32_t>>{{2, 3}, {0, 0}, {3, 1}}) {
    pg_backend_negotiate_in_t in = input(lo, hi);
    pg_backend_negotiate_out_t out{};
    out.struct_size = sizeof(out);
    t_error_count = 0;
    EXPECT_EQ(plugin.negotiate()(&in, &out), PG_ERR_ABI_MISMATCH) << lo << ".." << hi;
    EXPECT_EQ(t_error_count, 1);
    EXPECT_THAT(take_error(), HasSubstr("speaks backend interface version 1"));
    EXPECT_EQ(out.ops, nullptr) << "nothing filled on refusal";
  }
  // The Plugin helper reports the same through status().
  Plugin newer(PG_LOOPBACK_PATH, 2, 4);
  EXPECT_EQ(newer.status(), PG_ERR_ABI_MISMATCH);
  EXPECT_THAT(newer.error(), HasSubstr("the core offers 2..4"));
}

TEST(Negotiate, ChecksStructSizes) {
  Plugin plugin(PG_LOOPBACK_PATH);
  pg_backend_negotiate_in_t in = input(1, 1);
  pg_backend_negotiate_out_t out{};
  out.struct_size = offsetof(pg_backend_negotiate_out_t, ops);  // no room for the table
  EXPECT_EQ(plugin.negotiate()(&in, &out), PG_ERR_ABI_MISMATCH);
  EXPECT_THAT(take_error(), HasSubstr("output struct_size"));
  in.struct_size = 8;
  out.struct_size = sizeof(out);
  EXPECT_EQ(plugin.negotiate()(&in, &out), PG_ERR_ABI_MISMATCH);
  EXPECT_EQ(plugin.negotiate()(nullptr, &out), PG_ERR_INVALID_ARGUMENT);
  in = input(1, 1);
  EXPECT_EQ(plugin.negotiate()(&in, nullptr), PG_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(take_error(), HasSubstr("out is NULL"));
}

// A newer core's larger out struct: the plugin fills the version-1 fields only.
TEST(Negotiate, FillsOnlyWhatFitsALargerOutput) {
  Plugin plugin(PG_LOOPBACK_PATH);
  std::vector<unsigned char> storage(sizeof(pg_backend_negotiate_out_t) + 64, 0xAB);
  auto* out = reinterpret_cast<pg_backend_negotiate_out_t*>(storage.data());
  out->struct_size = static_cast<uint32_t>(storage.size());
  pg_backend_negotiate_in_t in = input(1, 3);
  ASSERT_EQ(plugin.negotiate()(&in, out), PG_OK);
  EXPECT_EQ(out->version, 1u);
  for (size_t i = sizeof(pg_backend_negotiate_out_t); i < storage.size(); ++i) {
    ASSERT_EQ(storage[i], 0xAB) << "byte " << i << " beyond the v1 struct was written";
  }
}

TEST(Negotiate, P2pPluginHasOnlySendAndRecv) {
  Plugin plugin(PG_LOOPBACK_P2P_PATH);
  ASSERT_EQ(plugin.status(), PG_OK) << plugin.error();
  const pg_backend_negotiate_out_t& info = plugin.info();
  EXPECT_STREQ(info.name, "loopback_p2p");
  EXPECT_EQ(info.native_ops, 1u << PG_OP_SEND | 1u << PG_OP_RECV);
  const pg_backend_ops_t& ops = plugin.ops();
  EXPECT_GE(ops.struct_size, PG_BACKEND_OPS_V1_SIZE);
  for (int o = 0; o < PG_OP_COUNT_; ++o) {
    bool p2p = o == PG_OP_SEND || o == PG_OP_RECV;
    EXPECT_EQ(entry(ops, o) != nullptr, p2p) << "op " << o;
  }
  EXPECT_NE(ops.group_create, nullptr);
  EXPECT_NE(ops.group_destroy, nullptr);
  EXPECT_NE(ops.group_abort, nullptr);
  EXPECT_NE(ops.work_test, nullptr);
  EXPECT_NE(ops.work_wait, nullptr);
  EXPECT_NE(ops.work_release, nullptr);
}

// Both plugins live in one process with separate registries.
TEST(Negotiate, BothPluginsLoadSideBySide) {
  Plugin full(PG_LOOPBACK_PATH);
  Plugin p2p(PG_LOOPBACK_P2P_PATH);
  ASSERT_EQ(full.status(), PG_OK);
  ASSERT_EQ(p2p.status(), PG_OK);
  EXPECT_NE(&full.ops(), &p2p.ops());
  World a(full, 2, {.timeout_ms = 5000, .group_id = "same"});
  World b(p2p, 2, {.timeout_ms = 5000, .group_id = "same"});
  ASSERT_TRUE(a.ok() && b.ok());
}

}  // namespace
}  // namespace procgroup::direct
