// Handles through the public C ABI: a destroyed group, a released work and a handle never
// made are PG_ERR_INVALID_ARGUMENT naming the call (never a crash, and never a read of
// freed memory: ASan runs these), and every entry point's NULL-argument message names it.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "thread_group.h"

namespace pgtest {
namespace {

// A one-rank loopback group of its own.
class OneRank : public ::testing::Test {
 protected:
  void SetUp() override {
    url_ = "file://" + dir_.path();
    pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
    o.size = 1;
    o.backend = "loopback";
    o.store_url = url_.c_str();
    o.timeout_ms = 10000;
    ASSERT_EQ(pg_group_create(&o, &group_), PG_OK) << pg_last_error();
  }
  void TearDown() override {
    if (group_ != nullptr) {
      EXPECT_EQ(pg_group_destroy(group_), PG_OK) << pg_last_error();
    }
  }
  pg_work_t start_allreduce() {
    pg_work_t w = nullptr;
    pg_buffer_t b = pg_buffer_cpu(&x_, 1, PG_DTYPE_F32);
    EXPECT_EQ(pg_allreduce(group_, nullptr, &b, nullptr, &w), PG_OK) << pg_last_error();
    return w;
  }

  TempDir dir_;
  std::string url_;
  pg_group_t group_ = nullptr;
  float x_ = 1;
};

void expect_invalid(pg_status_t status, const std::string& call, const std::string& says) {
  EXPECT_EQ(status, PG_ERR_INVALID_ARGUMENT) << call << ": " << pg_status_name(status);
  const std::string message = pg_last_error();
  EXPECT_EQ(message.rfind(call + ": ", 0), 0u) << message;
  EXPECT_NE(message.find(says), std::string::npos) << message;
}

TEST_F(OneRank, EveryCallOnADestroyedGroupIsAnInvalidArgument) {
  pg_group_t stale = group_;
  ASSERT_EQ(pg_group_destroy(group_), PG_OK) << pg_last_error();
  group_ = nullptr;
  const std::string dead = "group is not a live group handle (destroyed already";
  int32_t i = 0;
  const char* name = nullptr;
  pg_capabilities_t caps = PG_CAPABILITIES_INIT;
  pg_buffer_t b = pg_buffer_cpu(&x_, 1, PG_DTYPE_F32);
  pg_group_t child = nullptr;
  expect_invalid(pg_group_rank(stale, &i), "pg_group_rank", dead);
  expect_invalid(pg_group_size(stale, &i), "pg_group_size", dead);
  expect_invalid(pg_group_backend_name(stale, &name), "pg_group_backend_name", dead);
  expect_invalid(pg_group_capabilities(stale, &caps), "pg_group_capabilities", dead);
  expect_invalid(pg_group_abort(stale), "pg_group_abort", dead);
  expect_invalid(pg_group_split(stale, 0, 0, &child), "pg_group_split",
                 "parent is not a live group handle");
  expect_invalid(pg_allreduce(stale, nullptr, &b, nullptr, nullptr), "pg_allreduce", dead);
  expect_invalid(pg_barrier(stale, nullptr, nullptr), "pg_barrier", dead);
  expect_invalid(pg_group_destroy(stale), "pg_group_destroy", dead);
}

TEST_F(OneRank, AReleasedWorkIsAnInvalidArgumentAndReleasingTwiceToo) {
  pg_work_t w = start_allreduce();
  ASSERT_EQ(pg_work_wait(w, -1), PG_OK) << pg_last_error();
  ASSERT_EQ(pg_work_release(w), PG_OK) << pg_last_error();
  const std::string dead = "work is not a live work handle (released already";
  expect_invalid(pg_work_release(w), "pg_work_release", dead);
  expect_invalid(pg_work_test(w), "pg_work_test", dead);
  expect_invalid(pg_work_wait(w, 0), "pg_work_wait", dead);
}

TEST_F(OneRank, AStaleWorkStaysStaleWhenItsSlotIsReused) {
  pg_work_t first = start_allreduce();
  ASSERT_EQ(pg_work_release(first), PG_OK);
  pg_work_t second = start_allreduce();  // most likely the freed slot, a new generation
  expect_invalid(pg_work_test(first), "pg_work_test", "not a live work handle");
  EXPECT_EQ(pg_work_wait(second, -1), PG_OK) << pg_last_error();
  EXPECT_EQ(pg_work_release(second), PG_OK);
  expect_invalid(pg_work_release(first), "pg_work_release", "not a live work handle");
}

TEST_F(OneRank, HandlesNeverMadeByProcgroupAreRefusedWithoutReadingThem) {
  // Neither value is an address procgroup handed out; neither is dereferenced.
  for (uintptr_t value : {uintptr_t{0x10}, uintptr_t{0x7fffffff00000001}, ~uintptr_t{0}}) {
    int32_t rank = -1;
    expect_invalid(pg_group_rank(reinterpret_cast<pg_group_t>(value), &rank), "pg_group_rank",
                   "not a live group handle");
    expect_invalid(pg_work_release(reinterpret_cast<pg_work_t>(value)), "pg_work_release",
                   "not a live work handle");
  }
  // A work handle is no group handle, and the other way round.
  pg_work_t w = start_allreduce();
  int32_t size = 0;
  EXPECT_EQ(pg_group_size(group_, &size), PG_OK);
  EXPECT_EQ(pg_work_wait(w, -1), PG_OK);
  EXPECT_EQ(pg_work_release(w), PG_OK);
}

TEST_F(OneRank, ADestroyedGroupsUnreleasedWorkStaysValid) {
  pg_work_t w = start_allreduce();
  ASSERT_EQ(pg_group_destroy(group_), PG_OK) << pg_last_error();
  group_ = nullptr;
  EXPECT_EQ(pg_work_test(w), PG_OK) << pg_last_error();
  EXPECT_EQ(pg_work_release(w), PG_OK) << pg_last_error();
}

// A deadline ~31 years or more ahead would overflow the clock: an operation's is refused,
// and a wait that long is a wait without a limit of its own.
TEST_F(OneRank, TimeoutsBeyondTheLongestNeverOverflow) {
  pg_buffer_t b = pg_buffer_cpu(&x_, 1, PG_DTYPE_F32);
  pg_op_options_t o = PG_OP_OPTIONS_INIT;
  o.timeout_ms = INT64_MAX;
  expect_invalid(pg_allreduce(group_, nullptr, &b, &o, nullptr), "allreduce",
                 "longer than the longest timeout");
  pg_work_t w = start_allreduce();
  EXPECT_EQ(pg_work_wait(w, INT64_MAX), PG_OK) << pg_last_error();
  EXPECT_EQ(pg_work_release(w), PG_OK);
}

// Every public entry point, called with each of its pointers NULL in turn: the message
// starts with the name of the function the program called.
struct NullCase {
  std::string call;
  std::string argument;
  std::function<pg_status_t(pg_group_t)> run;
};

TEST_F(OneRank, EveryNullArgumentMessageNamesTheEntryPoint) {
  pg_buffer_t b = pg_buffer_cpu(&x_, 1, PG_DTYPE_F32);
  uint32_t u = 0;
  int32_t i = 0;
  pg_group_t out = nullptr;
  pg_store_t store = PG_STORE_INIT;
  const std::vector<NullCase> cases = {
      {"pg_get_version", "major", [&](pg_group_t) { return pg_get_version(nullptr, &u); }},
      {"pg_get_version", "minor", [&](pg_group_t) { return pg_get_version(&u, nullptr); }},
      {"pg_group_create", "out", [&](pg_group_t) { return pg_group_create(nullptr, nullptr); }},
      {"pg_group_create_with_store", "out",
       [&](pg_group_t) { return pg_group_create_with_store(nullptr, &store, nullptr); }},
      {"pg_group_create_with_store", "store",
       [&](pg_group_t) { return pg_group_create_with_store(nullptr, nullptr, &out); }},
      {"pg_group_split", "parent", [&](pg_group_t) { return pg_group_split(nullptr, 0, 0, &out); }},
      {"pg_group_split", "out", [&](pg_group_t g) { return pg_group_split(g, 0, 0, nullptr); }},
      {"pg_group_abort", "group", [&](pg_group_t) { return pg_group_abort(nullptr); }},
      {"pg_group_rank", "group", [&](pg_group_t) { return pg_group_rank(nullptr, &i); }},
      {"pg_group_rank", "rank", [&](pg_group_t g) { return pg_group_rank(g, nullptr); }},
      {"pg_group_size", "group", [&](pg_group_t) { return pg_group_size(nullptr, &i); }},
      {"pg_group_size", "size", [&](pg_group_t g) { return pg_group_size(g, nullptr); }},
      {"pg_group_backend_name", "group",
       [&](pg_group_t) {
         const char* n = nullptr;
         return pg_group_backend_name(nullptr, &n);
       }},
      {"pg_group_backend_name", "name",
       [&](pg_group_t g) { return pg_group_backend_name(g, nullptr); }},
      {"pg_group_capabilities", "group",
       [&](pg_group_t) {
         pg_capabilities_t caps = PG_CAPABILITIES_INIT;
         return pg_group_capabilities(nullptr, &caps);
       }},
      {"pg_group_capabilities", "caps",
       [&](pg_group_t g) { return pg_group_capabilities(g, nullptr); }},
      {"pg_allreduce", "group",
       [&](pg_group_t) { return pg_allreduce(nullptr, nullptr, &b, nullptr, nullptr); }},
      {"pg_broadcast", "group",
       [&](pg_group_t) { return pg_broadcast(nullptr, nullptr, &b, nullptr, nullptr); }},
      {"pg_reduce", "group",
       [&](pg_group_t) { return pg_reduce(nullptr, nullptr, &b, nullptr, nullptr); }},
      {"pg_allgather", "group",
       [&](pg_group_t) { return pg_allgather(nullptr, nullptr, &b, nullptr, nullptr); }},
      {"pg_reduce_scatter", "group",
       [&](pg_group_t) { return pg_reduce_scatter(nullptr, nullptr, &b, nullptr, nullptr); }},
      {"pg_gather", "group",
       [&](pg_group_t) { return pg_gather(nullptr, nullptr, &b, nullptr, nullptr); }},
      {"pg_scatter", "group",
       [&](pg_group_t) { return pg_scatter(nullptr, nullptr, &b, nullptr, nullptr); }},
      {"pg_alltoall", "group",
       [&](pg_group_t) { return pg_alltoall(nullptr, nullptr, &b, nullptr, nullptr); }},
      {"pg_barrier", "group", [&](pg_group_t) { return pg_barrier(nullptr, nullptr, nullptr); }},
      {"pg_send", "group", [&](pg_group_t) { return pg_send(nullptr, &b, nullptr, nullptr); }},
      {"pg_recv", "group", [&](pg_group_t) { return pg_recv(nullptr, &b, nullptr, nullptr); }},
      {"pg_work_test", "work", [&](pg_group_t) { return pg_work_test(nullptr); }},
      {"pg_work_wait", "work", [&](pg_group_t) { return pg_work_wait(nullptr, 0); }},
  };
  for (const NullCase& c : cases) {
    SCOPED_TRACE(c.call + "(" + c.argument + " = NULL)");
    expect_invalid(c.run(group_), c.call, c.argument + " is NULL");
  }
  // Where NULL means something, it is not an error.
  EXPECT_EQ(pg_work_release(nullptr), PG_OK);
  EXPECT_EQ(pg_group_destroy(nullptr), PG_OK);
}

}  // namespace
}  // namespace pgtest
