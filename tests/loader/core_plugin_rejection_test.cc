// The same mock plugins, through the public C ABI: every bad plugin ends as a status and a
// message from pg_group_create, never a crash; a send/recv-only plugin gets every op.
#include <gtest/gtest.h>

#include <string>

#include "procgroup/procgroup.h"

namespace {

pg_status_t create_with(const char* backend, pg_group_t* g) {
  pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
  o.size = 1;
  o.backend = backend;
  return pg_group_create(&o, g);
}

void expect_rejected(const char* path, pg_status_t want, const std::string& fragment) {
  pg_group_t g = nullptr;
  pg_status_t s = create_with(path, &g);
  EXPECT_EQ(s, want) << pg_status_name(s) << ": " << pg_last_error();
  EXPECT_EQ(g, nullptr);
  EXPECT_NE(std::string(pg_last_error()).find(fragment), std::string::npos) << pg_last_error();
}

TEST(CorePluginRejection, EveryBadPluginIsAStatusWithAMessage) {
  expect_rejected(MOCK_PLUGIN_NO_SYMBOL, PG_ERR_BACKEND_NOT_FOUND, "pg_backend_negotiate");
  expect_rejected(MOCK_PLUGIN_VERSION_TOO_NEW, PG_ERR_ABI_MISMATCH, "mock_version_too_new");
  expect_rejected(MOCK_PLUGIN_VERSION_TOO_OLD, PG_ERR_ABI_MISMATCH, "version");
  expect_rejected(MOCK_PLUGIN_TABLE_TOO_SMALL, PG_ERR_ABI_MISMATCH, "table");
  expect_rejected(MOCK_PLUGIN_NULL_WORK_WAIT, PG_ERR_BACKEND, "work_wait");
  expect_rejected(MOCK_PLUGIN_NEGOTIATE_ERROR, PG_ERR_BACKEND, "mock_negotiate_error");
  expect_rejected(MOCK_PLUGIN_NEGOTIATE_THROWS, PG_ERR_BACKEND, "threw");
  expect_rejected(MOCK_PLUGIN_THROWS_IN_CREATE, PG_ERR_BACKEND, "threw from group_create");
}

TEST(CorePluginRejection, SendRecvOnlyPluginRunsCollectives) {
  pg_group_t g = nullptr;
  ASSERT_EQ(create_with(MOCK_PLUGIN_P2P_ONLY, &g), PG_OK) << pg_last_error();
  double x[3] = {1, 2, 3};
  pg_buffer_t b = pg_buffer_cpu(x, 3, PG_DTYPE_F64);
  pg_op_options_t o = PG_OP_OPTIONS_INIT;
  o.reduce_op = PG_REDUCE_AVG;
  EXPECT_EQ(pg_allreduce(g, nullptr, &b, &o, nullptr), PG_OK) << pg_last_error();
  EXPECT_EQ(pg_barrier(g, nullptr, nullptr), PG_OK) << pg_last_error();
  EXPECT_EQ(x[2], 3.0);
  pg_capabilities_t caps = PG_CAPABILITIES_INIT;
  EXPECT_EQ(pg_group_capabilities(g, &caps), PG_OK);
  EXPECT_EQ(caps.native_ops, (1u << PG_OP_SEND) | (1u << PG_OP_RECV));
  EXPECT_EQ(pg_group_destroy(g), PG_OK) << pg_last_error();
}

}  // namespace
