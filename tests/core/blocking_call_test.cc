// A blocking operation (work = NULL) runs on the caller's thread without a work of its
// own (dispatch.cc), so pg_group_destroy on another thread must wait for it as it waits for
// outstanding works: the backend group may only go once no operation is pending on it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "thread_group.h"

namespace pgtest {
namespace {

using std::chrono::milliseconds;

class BlockingCall : public ::testing::TestWithParam<const char*> {};

// gloo's group_destroy fails what is still pending, so there this fails if destroy does
// not wait; loopback's drains its queue.
TEST_P(BlockingCall, DestroyOnAnotherThreadWaitsForIt) {
  run_thread_ranks(GetParam(), 2, [](pg_group_t g, int rank) {
    float x = 1;
    pg_buffer_t b = pg_buffer_cpu(&x, 1, PG_DTYPE_F32);
    if (rank == 1) {
      std::this_thread::sleep_for(milliseconds(1000));  // joins after rank 0's destroy began
      ASSERT_EQ(pg_allreduce(g, nullptr, &b, nullptr, nullptr), PG_OK) << pg_last_error();
      EXPECT_EQ(x, 2);
      return;
    }
    std::atomic<bool> call_returned{false};
    std::thread caller([&] {
      EXPECT_EQ(pg_allreduce(g, nullptr, &b, nullptr, nullptr), PG_OK) << pg_last_error();
      call_returned = true;
    });
    std::this_thread::sleep_for(milliseconds(300));  // the caller is inside its call now
    EXPECT_EQ(pg_group_destroy(g), PG_OK) << pg_last_error();
    EXPECT_TRUE(call_returned) << "pg_group_destroy returned while an allreduce was running";
    caller.join();
    EXPECT_EQ(x, 2);
  });
}

INSTANTIATE_TEST_SUITE_P(Backends, BlockingCall, PGTEST_THREAD_BACKENDS,
                         [](const auto& test) { return std::string(test.param); });

}  // namespace
}  // namespace pgtest
