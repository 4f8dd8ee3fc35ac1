// pg_work_on_complete: the callback runs exactly once with the work's final status, on
// every path: a backend that notifies (gloo), one the core waits for (loopback), a work
// done before the callback was set, a handle released first, and a work that times out
// with nobody waiting.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "thread_group.h"

namespace pgtest {
namespace {

using namespace std::chrono_literals;

struct Seen {
  std::atomic<int> calls{0};
  std::promise<std::pair<pg_status_t, std::string>> result;
};

void record(pg_status_t status, void* user) {
  auto* seen = static_cast<Seen*>(user);
  if (seen->calls.fetch_add(1) == 0)
    seen->result.set_value({status, status == PG_OK ? "" : pg_last_error()});
}

class OnComplete : public ::testing::TestWithParam<const char*> {};

TEST_P(OnComplete, RunsOnceWithTheResultWithoutAWait) {
  run_thread_ranks(GetParam(), 2, [](pg_group_t g, int rank) {
    float x[3] = {1.0f + rank, 2, 3};
    pg_buffer_t b = pg_buffer_cpu(x, 3, PG_DTYPE_F32);
    if (rank == 1) std::this_thread::sleep_for(200ms);  // the callback is set while pending
    pg_work_t w = nullptr;
    ASSERT_EQ(pg_allreduce(g, nullptr, &b, nullptr, &w), PG_OK) << pg_last_error();
    Seen seen;
    auto done = seen.result.get_future();
    ASSERT_EQ(pg_work_on_complete(w, &record, &seen), PG_OK) << pg_last_error();
    ASSERT_EQ(done.wait_for(20s), std::future_status::ready) << "rank " << rank;
    EXPECT_EQ(done.get().first, PG_OK);
    EXPECT_EQ(x[0], 3);
    EXPECT_EQ(x[2], 6);
    EXPECT_EQ(pg_work_test(w), PG_OK);
    EXPECT_EQ(pg_work_on_complete(w, &record, &seen), PG_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(pg_last_error()).find("completion callback already"),
              std::string::npos) << pg_last_error();
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(seen.calls.load(), 1);
    pg_work_release(w);
  });
}

TEST_P(OnComplete, RunsHereWhenTheWorkIsDoneAlready) {
  run_thread_ranks(GetParam(), 2, [](pg_group_t g, int) {
    float x = 1;
    pg_buffer_t b = pg_buffer_cpu(&x, 1, PG_DTYPE_F32);
    pg_work_t w = nullptr;
    ASSERT_EQ(pg_allreduce(g, nullptr, &b, nullptr, &w), PG_OK) << pg_last_error();
    ASSERT_EQ(pg_work_wait(w, -1), PG_OK) << pg_last_error();
    Seen seen;
    ASSERT_EQ(pg_work_on_complete(w, &record, &seen), PG_OK) << pg_last_error();
    EXPECT_EQ(seen.calls.load(), 1) << "not called before pg_work_on_complete returned";
    pg_work_release(w);
  });
}

TEST_P(OnComplete, RunsAfterTheHandleWasReleased) {
  run_thread_ranks(GetParam(), 2, [](pg_group_t g, int rank) {
    float x = 1;
    pg_buffer_t b = pg_buffer_cpu(&x, 1, PG_DTYPE_F32);
    if (rank == 1) std::this_thread::sleep_for(300ms);
    pg_work_t w = nullptr;
    ASSERT_EQ(pg_allreduce(g, nullptr, &b, nullptr, &w), PG_OK) << pg_last_error();
    Seen seen;
    auto done = seen.result.get_future();
    ASSERT_EQ(pg_work_on_complete(w, &record, &seen), PG_OK) << pg_last_error();
    pg_work_release(w);
    ASSERT_EQ(done.wait_for(20s), std::future_status::ready) << "rank " << rank;
    EXPECT_EQ(done.get().first, PG_OK);
    EXPECT_EQ(x, 2);
  });
}

TEST_P(OnComplete, AWorkNobodyWaitsForTimesOutIntoTheCallback) {
  RankOptions options;
  options.timeout_ms = 5000;
  run_thread_ranks(GetParam(), 2, [](pg_group_t g, int rank) {
    if (rank == 1) {
      std::this_thread::sleep_for(2500ms);  // never joins rank 0's allreduce
      return;
    }
    float x = 1;
    pg_buffer_t b = pg_buffer_cpu(&x, 1, PG_DTYPE_F32);
    pg_op_options_t o = PG_OP_OPTIONS_INIT;
    o.timeout_ms = 800;
    pg_work_t w = nullptr;
    ASSERT_EQ(pg_allreduce(g, nullptr, &b, &o, &w), PG_OK) << pg_last_error();
    Seen seen;
    auto done = seen.result.get_future();
    const auto start = std::chrono::steady_clock::now();
    ASSERT_EQ(pg_work_on_complete(w, &record, &seen), PG_OK) << pg_last_error();
    ASSERT_EQ(done.wait_for(10s), std::future_status::ready) << "the timeout never came";
    const auto took = std::chrono::steady_clock::now() - start;
    auto [status, message] = done.get();
    EXPECT_EQ(status, PG_ERR_TIMEOUT) << message;
    EXPECT_NE(message.find("allreduce"), std::string::npos) << message;
    EXPECT_GE(took, 600ms);
    EXPECT_LT(took, 4s);
    pg_work_release(w);
  }, options);
}

INSTANTIATE_TEST_SUITE_P(Backends, OnComplete, PGTEST_THREAD_BACKENDS,
                         [](const auto& test) { return std::string(test.param); });

TEST(OnCompleteArguments, NullsAreRefusedByName) {
  EXPECT_EQ(pg_work_on_complete(nullptr, &record, nullptr), PG_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pg_last_error()).find("pg_work_on_complete"), std::string::npos)
      << pg_last_error();
  run_thread_ranks("loopback", 1, [](pg_group_t g, int) {
    pg_work_t w = nullptr;
    ASSERT_EQ(pg_barrier(g, nullptr, &w), PG_OK) << pg_last_error();
    EXPECT_EQ(pg_work_on_complete(w, nullptr, nullptr), PG_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(pg_last_error()).find("pg_work_on_complete: fn is NULL"),
              std::string::npos) << pg_last_error();
    pg_work_release(w);
  });
}

}  // namespace
}  // namespace pgtest
