// send/recv on both plugins (loopback and loopback_p2p): matching by (src, dst, tag) in
// issue order, self-sends, eager sends that never block, size mismatches, timeouts, abort.
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

void wait_until(const std::atomic<int>& flag, int value) {
  while (flag.load() < value) std::this_thread::sleep_for(milliseconds(1));
}

pg_backend_op_t send_op(std::vector<int32_t>& v, int peer, uint64_t tag, int64_t timeout = 0) {
  return op(PG_OP_SEND, cpu(v.data(), v.size(), PG_DTYPE_I32), absent(),
            {.peer = peer, .tag = tag, .timeout_ms = timeout});
}
pg_backend_op_t recv_op(std::vector<int32_t>& v, int peer, uint64_t tag, int64_t timeout = 0) {
  return op(PG_OP_RECV, absent(), cpu(v.data(), v.size(), PG_DTYPE_I32),
            {.peer = peer, .tag = tag, .timeout_ms = timeout});
}

class P2p : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    plugin_ = std::make_unique<Plugin>(GetParam());
    ASSERT_EQ(plugin_->status(), PG_OK) << plugin_->error();
  }
  std::unique_ptr<Plugin> plugin_;
};

// Every rank sends to every rank (itself included) on a tag naming the pair; half the
// ranks post their recvs first, so both the buffered and the direct path run.
TEST_P(P2p, AllPairsIncludingSelf) {
  for (int size = 1; size <= 5; ++size) {
    World w(*plugin_, size, {.timeout_ms = 10000});
    ASSERT_TRUE(w.ok());
    w.run([&](int r) {
      const uint64_t base = r % 2 == 0 ? 0 : PG_BACKEND_RESERVED_TAG_BASE;
      std::vector<std::vector<int32_t>> out(size), in(size, std::vector<int32_t>(17, -1));
      std::vector<Work> works;
      auto post_sends = [&] {
        for (int d = 0; d < size; ++d) {
          out[d].resize(17);
          for (int i = 0; i < 17; ++i) out[d][i] = r * 10000 + d * 100 + i;
          uint64_t tag = (d % 2 == 0 ? 0 : PG_BACKEND_RESERVED_TAG_BASE) + r * 64 + d;
          works.push_back(w.start(r, send_op(out[d], d, tag)));
        }
      };
      auto post_recvs = [&] {
        for (int s = 0; s < size; ++s) {
          works.push_back(w.start(r, recv_op(in[s], s, base + s * 64 + r)));
        }
      };
      if (r % 2 == 0) {
        post_sends();
        post_recvs();
      } else {
        post_recvs();
        post_sends();
      }
      for (Work& work : works) ASSERT_EQ(work.wait(), PG_OK) << work.error();
      for (int s = 0; s < size; ++s) {
        for (int i = 0; i < 17; ++i) ASSERT_EQ(in[s][i], s * 10000 + r * 100 + i);
      }
    });
  }
}

// Messages between one pair match per tag, in issue order, whatever order recvs are posted.
TEST_P(P2p, TagsMatchInIssueOrder) {
  World w(*plugin_, 2, {.timeout_ms = 10000});
  ASSERT_TRUE(w.ok());
  const uint64_t kA = 5, kB = ~uint64_t{0};
  w.run([&](int r) {
    if (r == 0) {
      std::vector<int32_t> m1 = {1}, m2 = {2}, m3 = {3};
      EXPECT_EQ(w.call(0, send_op(m1, 1, kA)), PG_OK);
      EXPECT_EQ(w.call(0, send_op(m2, 1, kB)), PG_OK);
      EXPECT_EQ(w.call(0, send_op(m3, 1, kA)), PG_OK);
    } else {
      std::vector<int32_t> x = {0}, y = {0}, z = {0};
      Work wx = w.start(1, recv_op(x, 0, kB));
      Work wy = w.start(1, recv_op(y, 0, kA));
      Work wz = w.start(1, recv_op(z, 0, kA));
      EXPECT_EQ(wz.wait(), PG_OK);
      EXPECT_EQ(wy.wait(), PG_OK);
      EXPECT_EQ(wx.wait(), PG_OK);
      EXPECT_EQ(x[0], 2);
      EXPECT_EQ(y[0], 1);
      EXPECT_EQ(z[0], 3);
    }
  });
}

// Every rank sends to its right neighbour and waits for that send before receiving from
// its left: fine only because sends complete without their recv (eager copy).
TEST_P(P2p, BlockingRingDoesNotDeadlock) {
  World w(*plugin_, 5, {.timeout_ms = 10000});
  ASSERT_TRUE(w.ok());
  w.run([&](int r) {
    std::vector<int32_t> out = {r}, in = {-1};
    ASSERT_EQ(w.call(r, send_op(out, (r + 1) % 5, 7)), PG_OK);
    out[0] = 99;  // the send completed: its buffer is ours again
    ASSERT_EQ(w.call(r, recv_op(in, (r + 4) % 5, 7)), PG_OK);
    EXPECT_EQ(in[0], (r + 4) % 5);
  });
}

TEST_P(P2p, SizeMismatchFailsWithInvalidArgument) {
  World w(*plugin_, 2, {.timeout_ms = 10000});
  ASSERT_TRUE(w.ok());
  std::atomic<int> step{0};
  w.run([&](int r) {
    std::vector<int32_t> five(5, 1), four(4, 0);
    if (r == 1) {
      // Recv posted first: the send meets it, and both fail.
      Work recv = w.start(1, recv_op(four, 0, 1));
      step = 1;
      EXPECT_EQ(recv.wait(), PG_ERR_INVALID_ARGUMENT);
      EXPECT_NE(recv.error().find("20 bytes"), std::string::npos) << recv.error();
      EXPECT_NE(recv.error().find("16 bytes"), std::string::npos) << recv.error();
      // Send buffered first: it completed already, so only the recv can fail.
      wait_until(step, 2);
      std::string error;
      EXPECT_EQ(w.call(1, recv_op(four, 0, 2), &error), PG_ERR_INVALID_ARGUMENT);
      EXPECT_NE(error.find("matched a recv of 16 bytes"), std::string::npos) << error;
      // The pair was consumed and the group still works.
      std::vector<int32_t> ok(5, 0);
      EXPECT_EQ(w.call(1, recv_op(ok, 0, 3)), PG_OK);
      EXPECT_EQ(ok, five);
    } else {
      wait_until(step, 1);
      std::string error;
      EXPECT_EQ(w.call(0, send_op(five, 1, 1), &error), PG_ERR_INVALID_ARGUMENT);
      EXPECT_NE(error.find("from rank 0 to rank 1 (tag 1)"), std::string::npos) << error;
      EXPECT_EQ(w.call(0, send_op(five, 1, 2)), PG_OK);
      step = 2;
      EXPECT_EQ(w.call(0, send_op(five, 1, 3)), PG_OK);
    }
  });
}

TEST_P(P2p, ZeroLengthMessages) {
  World w(*plugin_, 2, {.timeout_ms = 10000});
  ASSERT_TRUE(w.ok());
  w.run([&](int r) {
    std::vector<int32_t> none;
    pg_backend_op_t o = r == 0 ? send_op(none, 1, 0) : recv_op(none, 0, 0);
    EXPECT_EQ(w.call(r, o), PG_OK);
  });
}

TEST_P(P2p, RecvTimeoutFailsTheGroup) {
  World w(*plugin_, 2, {.timeout_ms = 10000});
  ASSERT_TRUE(w.ok());
  std::atomic<int> step{0};
  w.run([&](int r) {
    std::vector<int32_t> x(3, 0);
    if (r == 1) {
      auto t0 = Clock::now();
      Work recv = w.start(1, recv_op(x, 0, 4, /*timeout=*/150));
      EXPECT_EQ(recv.wait(), PG_ERR_TIMEOUT);
      auto took = Clock::now() - t0;
      EXPECT_GE(took, milliseconds(140));
      EXPECT_LT(took, milliseconds(5000));
      EXPECT_NE(recv.error().find("not heard from rank 0"), std::string::npos) << recv.error();
      step = 1;
    } else {
      wait_until(step, 1);
      std::string error;
      EXPECT_EQ(w.call(0, send_op(x, 1, 4), &error), PG_ERR_ABORTED);
      EXPECT_NE(error.find("timed out"), std::string::npos) << error;
    }
  });
}

TEST_P(P2p, AbortFailsPendingRecvPromptly) {
  World w(*plugin_, 2, {.timeout_ms = 60000});
  ASSERT_TRUE(w.ok());
  std::vector<int32_t> x(1);
  Work recv = w.start(1, recv_op(x, 0, 0));
  std::thread watchdog([&] {
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_EQ(w.ops().group_abort(w.group(1)), PG_OK);
  });
  auto t0 = Clock::now();
  EXPECT_EQ(recv.wait(), PG_ERR_ABORTED);
  EXPECT_LT(Clock::now() - t0, milliseconds(5000));
  EXPECT_NE(recv.error().find("aborted by rank 1"), std::string::npos) << recv.error();
  watchdog.join();
}

// A rank that has not reached a collective yet still exchanges point-to-point messages
// with a rank already waiting in it.
TEST(P2pWithCollectives, NotBlockedBehindACollective) {
  Plugin plugin(PG_LOOPBACK_PATH);
  World w(plugin, 2, {.timeout_ms = 10000});
  ASSERT_TRUE(w.ok());
  w.run([&](int r) {
    std::vector<int32_t> sum = {1}, msg = {42}, got = {0};
    pg_buffer_t b = cpu(sum.data(), 1, PG_DTYPE_I32);
    if (r == 0) {
      Work coll = w.start(0, op(PG_OP_ALLREDUCE, b, b));
      ASSERT_EQ(w.call(0, send_op(msg, 1, 9)), PG_OK);
      ASSERT_EQ(w.call(0, recv_op(got, 1, 9)), PG_OK);
      EXPECT_EQ(coll.wait(), PG_OK);
    } else {
      ASSERT_EQ(w.call(1, recv_op(got, 0, 9)), PG_OK);
      ASSERT_EQ(w.call(1, send_op(got, 0, 9)), PG_OK);
      EXPECT_EQ(w.call(1, op(PG_OP_ALLREDUCE, b, b)), PG_OK);
    }
    EXPECT_EQ(got[0], 42);
    EXPECT_EQ(sum[0], 2);
  });
}

TEST_P(P2p, PeerOutOfRangeIsRejected) {
  World w(*plugin_, 2, {.timeout_ms = 10000});
  ASSERT_TRUE(w.ok());
  std::vector<int32_t> x(1);
  Work bad = w.start(0, send_op(x, 2, 0));
  EXPECT_EQ(bad.submit_status(), PG_ERR_INVALID_ARGUMENT);
  EXPECT_NE(bad.error().find("peer 2"), std::string::npos) << bad.error();
  Work negative = w.start(0, recv_op(x, -1, 0));
  EXPECT_EQ(negative.submit_status(), PG_ERR_INVALID_ARGUMENT);
}

INSTANTIATE_TEST_SUITE_P(Plugins, P2p, ::testing::Values(PG_LOOPBACK_PATH, PG_LOOPBACK_P2P_PATH),
                         [](const auto& param_info) {
                           return std::string(param_info.index == 0 ? "loopback" : "loopback_p2p");
                         });

}  // namespace
}  // namespace procgroup::direct
