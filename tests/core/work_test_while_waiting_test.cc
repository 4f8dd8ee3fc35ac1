// pg_work_test never blocks, also while another thread sits in pg_work_wait on the same
// work (a torch future's completer thread waits while the user polls is_completed()).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "thread_group.h"

namespace pgtest {
namespace {

TEST(WorkTest, DoesNotQueueBehindAWaiter) {
  run_thread_ranks("loopback", 2, [](pg_group_t g, int rank) {
    float x = 1;
    pg_buffer_t b = pg_buffer_cpu(&x, 1, PG_DTYPE_F32);
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // joins late
      ASSERT_EQ(pg_allreduce(g, nullptr, &b, nullptr, nullptr), PG_OK) << pg_last_error();
      return;
    }
    pg_work_t w = nullptr;
    ASSERT_EQ(pg_allreduce(g, nullptr, &b, nullptr, &w), PG_OK) << pg_last_error();
    std::thread waiter([w] { EXPECT_EQ(pg_work_wait(w, -1), PG_OK) << pg_last_error(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the waiter is inside now
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(pg_work_test(w), PG_PENDING);
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_LT(took, std::chrono::milliseconds(50))
        << "pg_work_test waited behind pg_work_wait";
    waiter.join();
    EXPECT_EQ(pg_work_test(w), PG_OK);
    EXPECT_EQ(x, 2);
    pg_work_release(w);
  });
}

}  // namespace
}  // namespace pgtest
