// Failures: mismatched collectives, timeouts naming the missing ranks, abort from another
// thread, argument validation (with set_error on the calling thread), rendezvous problems.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "direct_harness.h"

namespace procgroup::direct {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using ::testing::HasSubstr;

class Failures : public ::testing::Test {
 protected:
  void SetUp() override {
    plugin_ = std::make_unique<Plugin>(PG_LOOPBACK_PATH);
    ASSERT_EQ(plugin_->status(), PG_OK) << plugin_->error();
  }
  std::unique_ptr<Plugin> plugin_;
};

pg_backend_op_t allreduce_f32(std::vector<float>& v, OpArgs a = {}) {
  pg_buffer_t b = cpu(v.data(), v.size(), PG_DTYPE_F32);
  return op(PG_OP_ALLREDUCE, b, b, a);
}

// Every rank fails with the same message naming the first rank that differs from rank 0,
// and the group stays usable (all ranks counted one collective).
TEST_F(Failures, MismatchedOpFailsEveryRank) {
  World w(*plugin_, 3, {.timeout_ms = 10000});
  ASSERT_TRUE(w.ok());
  w.run([&](int r) {
    std::vector<float> v(1024, 1.0f);
    pg_buffer_t b = cpu(v.data(), 1024, PG_DTYPE_F32);
    pg_backend_op_t o =
        r == 1 ? op(PG_OP_BROADCAST, b, b, {.root = 0, .seq = 17}) : allreduce_f32(v, {.seq = 17});
    std::string error;
    EXPECT_EQ(w.call(r, o, &error), PG_ERR_MISMATCH);
    EXPECT_EQ(error,
              "rank 1 called broadcast(f32 x 1024, root 0) as op #17 while rank 0 called "
              "allreduce(f32 x 1024, sum)");
    std::vector<float> x = {1.0f};
    EXPECT_EQ(w.call(r, allreduce_f32(x)), PG_OK);
    EXPECT_EQ(x[0], 3.0f);
  });
}

TEST_F(Failures, MismatchedCountRootDtypeAndReduceOp) {
  World w(*plugin_, 2, {.timeout_ms = 10000});
  ASSERT_TRUE(w.ok());
  w.run([&](int r) {
    std::vector<float> v(8, 1.0f);
    std::vector<int32_t> iv(8, 1);
    auto expect = [&](pg_backend_op_t o, const std::string& message) {
      std::string error;
      EXPECT_EQ(w.call(r, o, &error), PG_ERR_MISMATCH) << message;
      EXPECT_THAT(error, HasSubstr(message));
    };
    pg_buffer_t b = cpu(v.data(), r == 0 ? 8 : 7, PG_DTYPE_F32);
    expect(op(PG_OP_ALLREDUCE, b, b), "rank 1 called allreduce(f32 x 7, sum)");
    b = cpu(v.data(), 8, PG_DTYPE_F32);
    expect(op(PG_OP_BROADCAST, b, b, {.root = r}), "broadcast(f32 x 8, root 1)");
    pg_buffer_t ib = cpu(iv.data(), 8, PG_DTYPE_I32);
    expect(op(PG_OP_ALLREDUCE, r == 0 ? b : ib, r == 0 ? b : ib), "allreduce(i32 x 8, sum)");
    expect(op(PG_OP_ALLREDUCE, b, b, {.reduce_op = r == 0 ? PG_REDUCE_SUM : PG_REDUCE_MAX}),
           "allreduce(f32 x 8, max)");
  });
}

// Ranks 0 and 1 reach an allreduce that rank 2 never calls: both fail with PG_ERR_TIMEOUT
// naming rank 2, and the group is aborted afterwards.
TEST_F(Failures, TimeoutNamesTheMissingRank) {
  World w(*plugin_, 3, {.timeout_ms = 10000});
  ASSERT_TRUE(w.ok());
  std::atomic<int> timed_out{0};
  w.run([&](int r) {
    std::vector<float> v(4, 1.0f);
    if (r != 2) {
      auto t0 = Clock::now();
      std::string error;
      EXPECT_EQ(w.call(r, allreduce_f32(v, {.timeout_ms = 200, .seq = 5}), &error), PG_ERR_TIMEOUT);
      auto took = Clock::now() - t0;
      EXPECT_GE(took, milliseconds(150));  // the first rank to give up waited 200 ms
      EXPECT_LT(took, milliseconds(5000));
      EXPECT_THAT(error, HasSubstr("allreduce(f32 x 4, sum) as op #5 timed out"));
      EXPECT_THAT(error, HasSubstr("not heard from rank(s) 2"));
      timed_out.fetch_add(1);
    } else {
      while (timed_out.load() < 2) std::this_thread::sleep_for(milliseconds(1));
    }
    // Later operations fail at once, on every rank.
    auto t0 = Clock::now();
    std::string error;
    EXPECT_EQ(w.call(r, op(PG_OP_BARRIER, absent(), absent()), &error), PG_ERR_ABORTED);
    EXPECT_LT(Clock::now() - t0, milliseconds(1000));
    EXPECT_THAT(error, HasSubstr("not heard from rank(s) 2"));
  });
}

TEST_F(Failures, AbortFromAnotherThreadFailsPendingAndLaterWork) {
  World w(*plugin_, 3, {.timeout_ms = 60000});
  ASSERT_TRUE(w.ok());
  std::vector<std::vector<float>> bufs(3, std::vector<float>(16, 1.0f));
  std::vector<Work> works;
  // Rank 0 queues three collectives that ranks 1 and 2 never join; rank 1 joins the first.
  for (int k = 0; k < 3; ++k) works.push_back(w.start(0, allreduce_f32(bufs[k])));
  std::vector<float> one(16, 1.0f);
  Work peer = w.start(1, allreduce_f32(one));
  std::thread watchdog([&] {
    std::this_thread::sleep_for(milliseconds(100));
    EXPECT_EQ(w.ops().group_abort(w.group(0)), PG_OK);
  });
  auto t0 = Clock::now();
  for (Work& work : works) {
    EXPECT_EQ(work.wait(), PG_ERR_ABORTED);
    EXPECT_THAT(work.error(), HasSubstr("aborted by rank 0"));
  }
  EXPECT_EQ(peer.wait(), PG_ERR_ABORTED);
  EXPECT_LT(Clock::now() - t0, milliseconds(5000));
  watchdog.join();
  EXPECT_EQ(w.call(2, allreduce_f32(one)), PG_ERR_ABORTED);
  EXPECT_EQ(one, std::vector<float>(16, 1.0f)) << "an aborted allreduce changed its buffer";
}

TEST_F(Failures, InvalidArgumentsAreRejectedAtSubmit) {
  World w(*plugin_, 2, {.timeout_ms = 10000});
  ASSERT_TRUE(w.ok());
  std::vector<float> v(8);
  const pg_backend_ops_t& ops = w.ops();
  auto expect = [&](const pg_backend_op_t& o, pg_status_t status, const std::string& message) {
    t_error_count = 0;
    Work work = start(ops, w.group(0), o);
    EXPECT_EQ(work.submit_status(), status) << message;
    EXPECT_EQ(t_error_count, 1) << "set_error before returning the error: " << message;
    EXPECT_THAT(work.error(), HasSubstr(message));
  };
  pg_buffer_t good = cpu(v.data(), 8, PG_DTYPE_F32);
  expect(op(PG_OP_ALLREDUCE, cpu(nullptr, 8, PG_DTYPE_F32), good), PG_ERR_INVALID_ARGUMENT,
         "data is NULL but count is 8");
  expect(op(PG_OP_ALLREDUCE, cpu(v.data(), 8, 42), cpu(v.data(), 8, 42)), PG_ERR_INVALID_ARGUMENT,
         "invalid dtype 42");
  pg_buffer_t gpu = good;
  gpu.device_type = PG_DEVICE_CUDA;
  expect(op(PG_OP_BROADCAST, gpu, gpu), PG_ERR_UNSUPPORTED, "CPU buffers only");
  expect(op(PG_OP_REDUCE, good, good, {.root = 2}), PG_ERR_INVALID_ARGUMENT, "root 2");
  expect(op(PG_OP_ALLREDUCE, good, good, {.reduce_op = 9}), PG_ERR_INVALID_ARGUMENT, "reduce op 9");
  expect(op(PG_OP_ALLGATHER, cpu(v.data(), 3, PG_DTYPE_F32), cpu(v.data() + 3, 5, PG_DTYPE_F32)),
         PG_ERR_INVALID_ARGUMENT, "not a multiple of the group size 2");
  expect(op(PG_OP_ALLREDUCE, cpu(v.data(), 4, PG_DTYPE_F32), cpu(v.data() + 2, 4, PG_DTYPE_F32)),
         PG_ERR_INVALID_ARGUMENT, "overlap");
  expect(op(PG_OP_REDUCE_SCATTER, good, cpu(v.data() + 1, 4, PG_DTYPE_F32)),
         PG_ERR_INVALID_ARGUMENT, "not this operation's in-place form");
  expect(op(PG_OP_ALLTOALL, cpu(v.data(), 3, PG_DTYPE_F32), cpu(v.data() + 3, 3, PG_DTYPE_F32)),
         PG_ERR_INVALID_ARGUMENT, "output count 3 is not a multiple");
  pg_backend_op_t small = op(PG_OP_ALLREDUCE, good, good);
  small.struct_size = 8;
  expect(small, PG_ERR_INVALID_ARGUMENT, "struct_size");
  pg_backend_op_t wrong = op(PG_OP_BROADCAST, good, good);
  pg_backend_work_t work = nullptr;
  EXPECT_EQ(ops.allreduce(w.group(0), &wrong, &work), PG_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(take_error(), HasSubstr("allreduce entry called with op 1"));
  EXPECT_EQ(ops.allreduce(w.group(0), nullptr, &work), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ops.allreduce(w.group(0), &small, nullptr), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ops.allreduce(nullptr, &small, &work), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ops.work_test(nullptr), PG_ERR_INVALID_ARGUMENT);
  // Nothing was issued, so the group is intact.
  w.run([&](int r) {
    std::vector<float> x = {2.0f};
    EXPECT_EQ(w.call(r, allreduce_f32(x)), PG_OK);
    EXPECT_EQ(x[0], 4.0f);
  });
}

TEST_F(Failures, FailedWorkSetsTheErrorOnTheTestingThread) {
  World w(*plugin_, 2, {.timeout_ms = 10000});
  ASSERT_TRUE(w.ok());
  std::vector<Work> works(2);
  w.run([&](int r) {
    std::vector<float> v(2);
    pg_buffer_t b = cpu(v.data(), r + 1, PG_DTYPE_F32);
    works[r] = w.start(r, op(PG_OP_ALLREDUCE, b, b));
    EXPECT_EQ(works[r].wait(), PG_ERR_MISMATCH);
  });
  // Another thread asks again: the message is set on that thread too.
  std::thread([&] {
    t_error_count = 0;
    EXPECT_EQ(works[0].test(), PG_ERR_MISMATCH);
    EXPECT_EQ(t_error_count, 1);
    EXPECT_THAT(works[0].error(), HasSubstr("rank 1 called allreduce(f32 x 2, sum)"));
  }).join();
}

TEST_F(Failures, RanksInAnotherProcessAreRefused) {
  auto store = std::make_shared<MemoryStore>();
  // Rank 0 "of another process" (pid 1) published its instance; rank 1 runs here.
  store->set("pg/xproc/loopback/instance", "1:1");
  World w(*plugin_, 2, {.timeout_ms = 2000, .group_id = "xproc", .store = store, .ranks = {1}});
  EXPECT_EQ(w.create_status(1), PG_ERR_UNSUPPORTED);
  EXPECT_THAT(w.create_error(1), HasSubstr("loopback ranks must be threads of one process; use "
                                           "gloo or ucx for processes"));
}

// A rendezvous missing a rank fails on the others, naming it; a retry under the same store
// scope then works (it must not find the dead instance).
TEST_F(Failures, RendezvousTimesOutNamingAbsentRanks) {
  auto store = std::make_shared<MemoryStore>();
  {
    auto t0 = Clock::now();
    World w(*plugin_, 3, {.timeout_ms = 200, .group_id = "late", .store = store, .ranks = {0, 2}});
    EXPECT_LT(Clock::now() - t0, milliseconds(5000));
    for (int r : {0, 2}) {
      EXPECT_EQ(w.create_status(r), PG_ERR_TIMEOUT);
      EXPECT_THAT(w.create_error(r), HasSubstr("not heard from rank(s) 1"));
    }
  }
  World retry(*plugin_, 3, {.timeout_ms = 5000, .group_id = "late", .store = store});
  EXPECT_TRUE(retry.ok()) << retry.create_error(1);
}

TEST_F(Failures, BadConfigIsRejected) {
  pg_backend_group_config_t c{};
  c.struct_size = sizeof(c);
  c.rank = 2;
  c.size = 2;
  c.timeout_ms = 100;
  c.group_id = "bad";
  pg_backend_group_t g = nullptr;
  EXPECT_EQ(plugin_->ops().group_create(&c, &g), PG_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(take_error(), HasSubstr("rank 2 is not within a group of size 2"));
  c.rank = 0;
  EXPECT_EQ(plugin_->ops().group_create(&c, &g), PG_ERR_INVALID_ARGUMENT);  // no store
  EXPECT_THAT(take_error(), HasSubstr("store"));
  EXPECT_EQ(plugin_->ops().group_create(nullptr, &g), PG_ERR_INVALID_ARGUMENT);
}

// A group created again under the same store scope must not find the old instance.
TEST_F(Failures, SameStoreScopeCanBeReused) {
  auto store = std::make_shared<MemoryStore>();
  for (int round = 0; round < 3; ++round) {
    World w(*plugin_, 3, {.timeout_ms = 5000, .group_id = "again", .store = store});
    ASSERT_TRUE(w.ok()) << w.create_error(1);
    EXPECT_FALSE(store->contains("pg/again/loopback/instance"));
    w.run([&](int r) {
      std::vector<float> x = {1.0f};
      EXPECT_EQ(w.call(r, allreduce_f32(x)), PG_OK);
      EXPECT_EQ(x[0], 3.0f);
    });
  }
}

}  // namespace
}  // namespace procgroup::direct
