// Groups over time: split into subgroups, a rank that never arrives (timeout), abort
// from another thread, waits with their own timeout, and failing fast afterwards.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "thread_ranks.h"

namespace pgtest {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

class Lifecycle : public ::testing::TestWithParam<std::string> {};

TEST_P(Lifecycle, SplitByParityOrderedByKey) {
  const int world = 5;
  run_thread_ranks(GetParam(), world, [&](pg_group_t g, int rank) {
    pg_group_t sub = nullptr;
    // Odd ranks opt out of the second split; key reverses the order.
    ASSERT_EQ(pg_group_split(g, rank % 2, -rank, &sub), PG_OK) << pg_last_error();
    ASSERT_NE(sub, nullptr);
    int32_t sub_rank = -1, sub_size = -1;
    pg_group_rank(sub, &sub_rank);
    pg_group_size(sub, &sub_size);
    const int members = rank % 2 == 0 ? 3 : 2;  // {0,2,4} and {1,3}
    EXPECT_EQ(sub_size, members);
    // Reverse order: the highest parent rank of the color is sub-rank 0.
    const int highest = rank % 2 == 0 ? 4 : 3;
    EXPECT_EQ(sub_rank, (highest - rank) / 2);
    int64_t value = rank;
    pg_buffer_t b = pg_buffer_cpu(&value, 1, PG_DTYPE_I64);
    ASSERT_EQ(pg_allreduce(sub, nullptr, &b, nullptr, nullptr), PG_OK) << pg_last_error();
    EXPECT_EQ(value, rank % 2 == 0 ? 0 + 2 + 4 : 1 + 3);
    EXPECT_EQ(pg_group_destroy(sub), PG_OK) << pg_last_error();

    pg_group_t only_even = nullptr;
    ASSERT_EQ(pg_group_split(g, rank % 2 ? PG_SPLIT_NO_COLOR : 0, rank, &only_even), PG_OK)
        << pg_last_error();
    EXPECT_EQ(only_even == nullptr, rank % 2 == 1);
    if (only_even) {
      ASSERT_EQ(pg_barrier(only_even, nullptr, nullptr), PG_OK) << pg_last_error();
      EXPECT_EQ(pg_group_destroy(only_even), PG_OK);
    }
    // The parent still works after its children are gone.
    ASSERT_EQ(pg_barrier(g, nullptr, nullptr), PG_OK) << pg_last_error();
  });
}

TEST_P(Lifecycle, MissingRankTimesOutThenFailsFast) {
  RankOptions options;
  options.timeout_ms = 1000;
  run_thread_ranks(
      GetParam(), 2,
      [&](pg_group_t g, int rank) {
        if (rank == 1) return;  // never joins the collective
        float x[4] = {1, 2, 3, 4};
        pg_buffer_t b = pg_buffer_cpu(x, 4, PG_DTYPE_F32);
        auto start = Clock::now();
        pg_status_t s = pg_allreduce(g, nullptr, &b, nullptr, nullptr);
        double took = seconds_since(start);
        EXPECT_EQ(s, PG_ERR_TIMEOUT) << pg_status_name(s) << ": " << pg_last_error();
        std::string message = pg_last_error();
        EXPECT_NE(message.find("allreduce #1"), std::string::npos) << message;
        EXPECT_LT(took, 2 * 1.0 + 0.5) << "timeout must fire within two group timeouts";
        EXPECT_GE(took, 0.9);
        start = Clock::now();
        s = pg_allreduce(g, nullptr, &b, nullptr, nullptr);
        EXPECT_EQ(s, PG_ERR_ABORTED);
        EXPECT_NE(std::string(pg_last_error()).find("failed earlier"), std::string::npos)
            << pg_last_error();
        EXPECT_LT(seconds_since(start), 0.2);
      },
      options);
}

TEST_P(Lifecycle, WaitWithOwnTimeoutReturnsPendingThenCompletes) {
  run_thread_ranks(GetParam(), 2, [&](pg_group_t g, int rank) {
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    int32_t x = rank + 1;
    pg_buffer_t b = pg_buffer_cpu(&x, 1, PG_DTYPE_I32);
    pg_work_t w = nullptr;
    ASSERT_EQ(pg_allreduce(g, nullptr, &b, nullptr, &w), PG_OK) << pg_last_error();
    if (rank == 0) {
      EXPECT_EQ(pg_work_wait(w, 50), PG_PENDING);
    }
    EXPECT_EQ(pg_work_wait(w, -1), PG_OK) << pg_last_error();
    EXPECT_EQ(x, 3);
    pg_work_release(w);
  });
}

TEST_P(Lifecycle, AbortFromAnotherThreadEndsAPendingWait) {
  RankOptions options;
  options.timeout_ms = 20000;
  run_thread_ranks(
      GetParam(), 2,
      [&](pg_group_t g, int rank) {
        if (rank == 1) return;
        std::thread watchdog([g] {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          pg_group_abort(g);
        });
        float x = 1;
        pg_buffer_t b = pg_buffer_cpu(&x, 1, PG_DTYPE_F32);
        auto start = Clock::now();
        pg_status_t s = pg_allreduce(g, nullptr, &b, nullptr, nullptr);
        watchdog.join();
        EXPECT_EQ(s, PG_ERR_ABORTED) << pg_status_name(s) << ": " << pg_last_error();
        EXPECT_LT(seconds_since(start), 5.0);
      },
      options);
}

INSTANTIATE_TEST_SUITE_P(Loopback, Lifecycle, ::testing::Values("loopback", "loopback_p2p"));

}  // namespace
}  // namespace pgtest
