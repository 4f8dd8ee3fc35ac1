// Statuses a plugin must not return (PG_PENDING from group_create, values that are no
// pg_status_t) reach the user as PG_ERR_BACKEND naming the plugin, the value and the entry,
// and fail the group like any backend failure: the status probe plugin returns them.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "thread_group.h"

namespace pgtest {
namespace {

class PluginStatus : public ::testing::Test {
 protected:
  void TearDown() override {
    unsetenv("PGTEST_PROBE_CREATE_STATUS");
    unsetenv("PGTEST_PROBE_WAIT_STATUS");
    if (group_ != nullptr) pg_group_destroy(group_);
  }
  pg_status_t create() {
    url_ = "file://" + dir_.path();
    pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
    o.size = 1;
    o.backend = PG_STATUS_PROBE_PATH;
    o.store_url = url_.c_str();
    o.timeout_ms = 10000;
    return pg_group_create(&o, &group_);
  }
  // group_abort calls the plugin has seen.
  static int plugin_aborts() {
    void* plugin = dlopen(PG_STATUS_PROBE_PATH, RTLD_NOW | RTLD_NOLOAD);
    if (plugin == nullptr) return -1;
    auto* aborts = reinterpret_cast<int (*)()>(dlsym(plugin, "pgtest_status_probe_aborts"));
    const int n = aborts != nullptr ? aborts() : -1;
    dlclose(plugin);
    return n;
  }

  TempDir dir_;
  std::string url_;
  pg_group_t group_ = nullptr;
};

void expect_names(const std::string& message, std::initializer_list<const char*> parts) {
  for (const char* part : parts)
    EXPECT_NE(message.find(part), std::string::npos) << "no '" << part << "' in: " << message;
}

TEST_F(PluginStatus, AnUnknownValueFromGroupCreateIsABackendError) {
  setenv("PGTEST_PROBE_CREATE_STATUS", "12345", 1);
  EXPECT_EQ(create(), PG_ERR_BACKEND);
  EXPECT_EQ(group_, nullptr);
  expect_names(pg_last_error(), {"backend 'status_probe' returned 12345 from group_create",
                                 "(it is not a pg_status_t): status probe: as told"});
}

TEST_F(PluginStatus, PendingFromGroupCreateIsABackendError) {
  setenv("PGTEST_PROBE_CREATE_STATUS", "1", 1);  // PG_PENDING
  EXPECT_EQ(create(), PG_ERR_BACKEND);
  EXPECT_EQ(group_, nullptr);
  expect_names(pg_last_error(), {"'status_probe' returned PG_PENDING from group_create",
                                 "only work_test and work_wait may return it"});
}

TEST_F(PluginStatus, AnUnknownValueFromWorkWaitFailsAndAbortsTheGroup) {
  ASSERT_EQ(create(), PG_OK) << pg_last_error();
  const int aborts_before = plugin_aborts();
  setenv("PGTEST_PROBE_WAIT_STATUS", "777", 1);
  float x = 1;
  pg_buffer_t b = pg_buffer_cpu(&x, 1, PG_DTYPE_F32);
  pg_work_t w = nullptr;
  ASSERT_EQ(pg_allreduce(group_, nullptr, &b, nullptr, &w), PG_OK) << pg_last_error();
  EXPECT_EQ(pg_work_wait(w, -1), PG_ERR_BACKEND);
  expect_names(pg_last_error(), {"allreduce #1", "'status_probe' returned 777 from work_wait"});
  EXPECT_EQ(pg_work_release(w), PG_OK);
  EXPECT_EQ(plugin_aborts(), aborts_before + 1);
  EXPECT_EQ(pg_allreduce(group_, nullptr, &b, nullptr, nullptr), PG_ERR_ABORTED);
  expect_names(pg_last_error(), {"failed earlier", "returned 777"});
}

TEST_F(PluginStatus, AKnownFailureFromWorkWaitStaysAsItIs) {
  ASSERT_EQ(create(), PG_OK) << pg_last_error();
  setenv("PGTEST_PROBE_WAIT_STATUS", "5", 1);  // PG_ERR_PEER_LOST
  float x = 1;
  pg_buffer_t b = pg_buffer_cpu(&x, 1, PG_DTYPE_F32);
  EXPECT_EQ(pg_allreduce(group_, nullptr, &b, nullptr, nullptr), PG_ERR_PEER_LOST);
}

}  // namespace
}  // namespace pgtest
