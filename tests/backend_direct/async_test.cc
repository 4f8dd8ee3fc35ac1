// Asynchronous behaviour: many operations in flight waited in any order, work_release on
// pending works, work_wait's own timeout, destroy with released work, works outliving the
// group, and independent groups in one process.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <vector>

#include "direct_harness.h"

namespace procgroup::direct {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

int32_t input_value(int rank, int k, uint64_t i) {
  return static_cast<int32_t>(rank * 1000 + k * 10 + i);
}

// Op k: allreduce (sum) when k is even, broadcast from rank k % size when odd; in place.
int32_t expected_value(int size, int k, uint64_t i) {
  if (k % 2 == 1) return input_value(k / 2 % size, k, i);
  int32_t sum = 0;
  for (int r = 0; r < size; ++r) sum += input_value(r, k, i);
  return sum;
}

pg_backend_op_t mixed_op(int size, int k, std::vector<int32_t>& buf) {
  pg_buffer_t b = cpu(buf.data(), buf.size(), PG_DTYPE_I32);
  if (k % 2 == 1) return op(PG_OP_BROADCAST, b, b, {.root = k / 2 % size});
  return op(PG_OP_ALLREDUCE, b, b);
}

TEST(Async, ManyInFlightWaitedOutOfOrder) {
  Plugin plugin(PG_LOOPBACK_PATH);
  World w(plugin, 4, {.timeout_ms = 10000});
  ASSERT_TRUE(w.ok());
  constexpr int kOps = 64;
  constexpr uint64_t kN = 33;
  w.run([&](int r) {
    std::vector<std::vector<int32_t>> bufs(kOps, std::vector<int32_t>(kN));
    std::vector<Work> works;
    for (int k = 0; k < kOps; ++k) {
      for (uint64_t i = 0; i < kN; ++i) bufs[k][i] = input_value(r, k, i);
      works.push_back(w.start(r, mixed_op(w.size(), k, bufs[k])));
      ASSERT_EQ(works.back().submit_status(), PG_OK) << works.back().error();
    }
    std::vector<int> order(kOps);
    for (int k = 0; k < kOps; ++k) order[k] = k;
    std::shuffle(order.begin(), order.end(), std::mt19937(r));
    for (int k : order) {
      ASSERT_EQ(works[k].wait(), PG_OK) << works[k].error();
      for (uint64_t i = 0; i < kN; ++i) {
        ASSERT_EQ(bufs[k][i], expected_value(w.size(), k, i)) << "rank " << r << " op " << k;
      }
    }
  });
}

// Released pending works run to completion in issue order: once a later barrier completed,
// their results are in place.
TEST(Async, ReleasedPendingWorksStillComplete) {
  Plugin plugin(PG_LOOPBACK_PATH);
  World w(plugin, 3, {.timeout_ms = 10000});
  ASSERT_TRUE(w.ok());
  constexpr int kOps = 20;
  w.run([&](int r) {
    std::vector<std::vector<int32_t>> bufs(kOps, std::vector<int32_t>(5));
    for (int k = 0; k < kOps; ++k) {
      for (uint64_t i = 0; i < 5; ++i) bufs[k][i] = input_value(r, k, i);
      Work work = w.start(r, mixed_op(w.size(), k, bufs[k]));
      ASSERT_EQ(work.submit_status(), PG_OK);
      work.release();  // while (most likely) still pending
    }
    ASSERT_EQ(w.call(r, op(PG_OP_BARRIER, absent(), absent())), PG_OK);
    for (int k = 0; k < kOps; ++k) {
      for (uint64_t i = 0; i < 5; ++i) ASSERT_EQ(bufs[k][i], expected_value(w.size(), k, i));
    }
  });
}

TEST(Async, WaitTimeoutReturnsPendingAndWorkGoesOn) {
  Plugin plugin(PG_LOOPBACK_PATH);
  World w(plugin, 2, {.timeout_ms = 10000});
  ASSERT_TRUE(w.ok());
  std::atomic<bool> rank0_checked{false};
  w.run([&](int r) {
    std::vector<int32_t> x = {r + 1};
    pg_buffer_t b = cpu(x.data(), 1, PG_DTYPE_I32);
    if (r == 1) {
      while (!rank0_checked.load()) std::this_thread::sleep_for(milliseconds(1));
    }
    Work work = w.start(r, op(PG_OP_ALLREDUCE, b, b));
    if (r == 0) {
      EXPECT_EQ(work.test(), PG_PENDING);
      auto t0 = Clock::now();
      EXPECT_EQ(work.wait(30), PG_PENDING);
      auto waited = Clock::now() - t0;
      EXPECT_GE(waited, milliseconds(25));
      EXPECT_LT(waited, milliseconds(3000));
      EXPECT_EQ(work.wait(0), PG_PENDING);
      rank0_checked = true;
    }
    EXPECT_EQ(work.wait(-1), PG_OK) << work.error();
    EXPECT_EQ(x[0], 3);
  });
}

// destroy runs what was issued (released or not) before it returns; a completed work can
// be tested and released after its group is gone.
TEST(Async, DestroyDrainsIssuedWorkAndWorksOutliveTheGroup) {
  Plugin plugin(PG_LOOPBACK_PATH);
  constexpr int kSize = 3;
  std::vector<std::vector<int32_t>> bufs(kSize, std::vector<int32_t>(100));
  std::vector<Work> kept(kSize);
  {
    World w(plugin, kSize, {.timeout_ms = 10000});
    ASSERT_TRUE(w.ok());
    w.run([&](int r) {
      for (int k = 0; k < 4; ++k) {
        std::fill(bufs[r].begin(), bufs[r].end(), r + 1);
        pg_buffer_t b = cpu(bufs[r].data(), 100, PG_DTYPE_I32);
        Work work = w.start(r, op(PG_OP_ALLREDUCE, b, b, {.reduce_op = PG_REDUCE_MAX}));
        if (k == 3) {
          kept[r] = std::move(work);  // kept, never waited before destroy
        } else {
          ASSERT_EQ(work.wait(), PG_OK);
        }
      }
      EXPECT_EQ(w.destroy(r), PG_OK);
      // destroy returned: the last allreduce has completed and no thread touches bufs[r].
      for (int32_t v : bufs[r]) ASSERT_EQ(v, kSize);
    });
  }
  for (Work& work : kept) EXPECT_EQ(work.test(), PG_OK) << work.error();
}

TEST(Async, TwoGroupsInOneProcessAreIndependent) {
  Plugin plugin(PG_LOOPBACK_PATH);
  World a(plugin, 3, {.timeout_ms = 10000});
  World b(plugin, 3, {.timeout_ms = 10000});
  ASSERT_TRUE(a.ok() && b.ok());
  run_ranks(3, [&](int r) {
    std::vector<int32_t> xa = {r}, xb = {10 * r};
    // Interleaved differently per rank: each group only needs its own issue order.
    Work wa, wb;
    if (r % 2 == 0) {
      wa = a.start(
          r, op(PG_OP_ALLREDUCE, cpu(xa.data(), 1, PG_DTYPE_I32), cpu(xa.data(), 1, PG_DTYPE_I32)));
      wb = b.start(
          r, op(PG_OP_ALLREDUCE, cpu(xb.data(), 1, PG_DTYPE_I32), cpu(xb.data(), 1, PG_DTYPE_I32)));
    } else {
      wb = b.start(
          r, op(PG_OP_ALLREDUCE, cpu(xb.data(), 1, PG_DTYPE_I32), cpu(xb.data(), 1, PG_DTYPE_I32)));
      wa = a.start(
          r, op(PG_OP_ALLREDUCE, cpu(xa.data(), 1, PG_DTYPE_I32), cpu(xa.data(), 1, PG_DTYPE_I32)));
    }
    EXPECT_EQ(wb.wait(), PG_OK);
    EXPECT_EQ(wa.wait(), PG_OK);
    EXPECT_EQ(xa[0], 3);
    EXPECT_EQ(xb[0], 30);
  });
}

}  // namespace
}  // namespace procgroup::direct
