// Failures of the gloo plugin with ranks as real processes: a peer killed mid-sequence,
// abort from another thread, a stalled peer (timeout), a rendezvous nobody joins, and
// destroy with a released pending work. Every case is bounded well below its timeout.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>

#include "gloo_test_support.h"
#include "gloo_typed_buffer.h"

namespace procgroup::gloo_test {
namespace {

using Clock = std::chrono::steady_clock;

int64_t ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

bool lost_or_timeout(pg_status_t st) { return st == PG_ERR_PEER_LOST || st == PG_ERR_TIMEOUT; }

struct KillCase {
  int size;
  int victim;
};

class GlooKilledPeer : public ::testing::TestWithParam<KillCase> {};

TEST_P(GlooKilledPeer, SurvivorsFailWithinTheTimeout) {
  const KillCase c = GetParam();
  WorldOptions opts;
  opts.timeout_ms = 3000;
  opts.killed = {c.victim};
  run_world(c.size, opts, [c, timeout_ms = opts.timeout_ms](RankEnv& r) {
    std::vector<float> x(1000, 1.0f);
    pg_buffer_t b = cpu(x.data(), x.size(), PG_DTYPE_F32);
    for (int i = 0; i < 3; ++i) {
      std::string err;
      r.expect_status(r.run(make_op(PG_OP_ALLREDUCE, b, b), &err), PG_OK, "warm-up " + err);
    }
    // A recv from the victim that it will never answer.
    float y = 0;
    OpArgs a;
    a.peer = c.victim;
    a.tag = 1;
    Work pending = r.rank == c.victim
                       ? Work(nullptr, nullptr, PG_OK, "")
                       : r.start(make_op(PG_OP_RECV, absent(), cpu(&y, 1, PG_DTYPE_F32), a));
    r.expect_status(r.run(make_op(PG_OP_BARRIER, absent(), absent())), PG_OK, "barrier");
    // The victim dies only once every survivor is through the barrier (mid-sequence, but
    // not mid-barrier: a killed socket may drop data still in flight).
    if (r.rank != c.victim) r.store->put("through" + std::to_string(r.rank), "1");
    if (r.rank == c.victim) {
      std::string v;
      for (int q = 0; q < r.size; ++q) {
        if (q != c.victim) r.expect(r.store->fetch("through" + std::to_string(q), 10000, &v), "");
      }
      raise(SIGKILL);
    }

    const auto start = Clock::now();
    Work w = r.start(make_op(PG_OP_ALLREDUCE, b, b));
    const pg_status_t st = w.wait();
    const int64_t took = ms_since(start);
    // Whichever work saw the loss first reports it; the other one is aborted with that
    // cause. Every message names its operation and seq.
    const pg_status_t pst = r.rank == c.victim ? PG_OK : pending.wait();
    r.expect(lost_or_timeout(st) || st == PG_ERR_ABORTED, "allreduce: " + w.error());
    r.expect(lost_or_timeout(pst) || pst == PG_ERR_ABORTED, "recv: " + pending.error());
    r.expect(lost_or_timeout(st) || lost_or_timeout(pst),
             "one of them saw the loss itself: " + w.error() + " | " + pending.error());
    r.expect(w.error().rfind("allreduce #6: ", 0) == 0, "names the op and seq: " + w.error());
    r.expect(pending.error().rfind("recv #4: ", 0) == 0, "names the op: " + pending.error());
    r.expect((w.error() + pending.error()).find("lost") != std::string::npos ||
                 (w.error() + pending.error()).find("timed out") != std::string::npos,
             "the cause is given: " + w.error());
    r.expect(took < 2 * timeout_ms, "failed after " + std::to_string(took) + " ms");
    // Later submissions fail fast.
    const auto later = Clock::now();
    Work next = r.start(make_op(PG_OP_ALLREDUCE, b, b));
    r.expect(next.wait() == PG_ERR_ABORTED, "later op: " + next.error());
    r.expect(ms_since(later) < 1000, "later op failed fast");
    const auto destroy = Clock::now();
    r.expect_status(r.ops->group_destroy(r.group), PG_OK, "destroy");
    r.group = nullptr;
    r.expect(ms_since(destroy) < 2000, "destroy took " + std::to_string(ms_since(destroy)));
  });
}

INSTANTIATE_TEST_SUITE_P(Cases, GlooKilledPeer,
                         ::testing::Values(KillCase{2, 1}, KillCase{3, 2}, KillCase{4, 1}),
                         [](const ::testing::TestParamInfo<KillCase>& p) {
                           return "size" + std::to_string(p.param.size) + "_victim" +
                                  std::to_string(p.param.victim);
                         });

TEST(GlooFailure, AbortFromAnotherThreadFailsPendingWorksPromptly) {
  WorldOptions opts;
  opts.timeout_ms = 20000;  // abort must not wait for this
  run_world(2, opts, [](RankEnv& r) {
    if (r.rank == 0) {
      float y = 0;
      std::vector<float> x(100, 1.0f);
      OpArgs a;
      a.peer = 1;
      a.tag = 9;
      Work recv = r.start(make_op(PG_OP_RECV, absent(), cpu(&y, 1, PG_DTYPE_F32), a));
      pg_buffer_t b = cpu(x.data(), x.size(), PG_DTYPE_F32);
      Work reduce = r.start(make_op(PG_OP_ALLREDUCE, b, b));  // rank 1 never joins
      Work queued = r.start(make_op(PG_OP_BARRIER, absent(), absent()));
      r.expect_status(reduce.wait(100), PG_PENDING, "allreduce before abort");
      const auto start = Clock::now();
      std::thread aborter([&] { r.ops->group_abort(r.group); });
      for (Work* w : {&reduce, &recv, &queued}) {
        r.expect_status(w->wait(), PG_ERR_ABORTED, "pending work after abort: " + w->error());
        r.expect(w->error().find("abort") != std::string::npos, "message: " + w->error());
      }
      aborter.join();
      r.expect(ms_since(start) < 3000, "abort took " + std::to_string(ms_since(start)) + " ms");
      Work later = r.start(make_op(PG_OP_ALLREDUCE, b, b));
      r.expect_status(later.submit_status(), PG_ERR_ABORTED, "submission after abort");
      r.expect(!later.error().empty(), "message for the refused submission");
      r.store->put("aborted", "1");
      const auto destroy = Clock::now();
      r.expect_status(r.ops->group_destroy(r.group), PG_OK, "destroy after abort");
      r.group = nullptr;
      r.expect(ms_since(destroy) < 2000, "destroy after abort was prompt");
    } else {
      std::string v;
      r.expect(r.store->fetch("aborted", 15000, &v), "rank 0 aborted");
      // Rank 0's abort closed its connections: this rank notices at once, not at its timeout.
      const auto start = Clock::now();
      std::string err;
      const pg_status_t st = r.run(make_op(PG_OP_BARRIER, absent(), absent()), &err);
      r.expect_status(st, PG_ERR_PEER_LOST, "barrier with an aborted peer " + err);
      r.expect(err.find("rank 0") != std::string::npos, "names the lost peer: " + err);
      r.expect(ms_since(start) < 3000, "noticed after " + std::to_string(ms_since(start)));
    }
  });
}

TEST(GlooFailure, AStalledPeerTimesOut) {
  WorldOptions opts;
  opts.timeout_ms = 1500;
  run_world(2, opts, [](RankEnv& r) {
    std::vector<float> x(10, 1.0f);
    pg_buffer_t b = cpu(x.data(), x.size(), PG_DTYPE_F32);
    if (r.rank == 0) {
      const auto start = Clock::now();
      std::string err;
      r.expect_status(r.run(make_op(PG_OP_ALLREDUCE, b, b), &err), PG_ERR_TIMEOUT, "stalled");
      const int64_t took = ms_since(start);
      r.expect(took >= 1000 && took < 4000, "timed out after " + std::to_string(took) + " ms");
      r.expect(err.find("allreduce #1") != std::string::npos, "names the op: " + err);
      r.expect(err.find("timed out") != std::string::npos, "says timed out: " + err);
      // The peer is stopped, not mismatched: no guess about different arguments.
      r.expect(err.find("different") == std::string::npos, "no mismatch guess: " + err);
      r.store->put("done", "1");
      Work later = r.start(make_op(PG_OP_ALLREDUCE, b, b));
      r.expect_status(later.submit_status(), PG_ERR_ABORTED,
                      "after a timeout the group is aborted");
    } else {
      std::string v;
      r.expect(r.store->fetch("done", 10000, &v), "rank 0 timed out");
      std::string err;
      const pg_status_t st = r.run(make_op(PG_OP_ALLREDUCE, b, b), &err);
      r.expect(lost_or_timeout(st), "late joiner fails too: " + err);
    }
  });
}

TEST(GlooFailure, APerOperationTimeoutIsHonoured) {
  WorldOptions opts;
  opts.timeout_ms = 20000;
  run_world(2, opts, [](RankEnv& r) {
    if (r.rank == 0) {
      float y = 0;
      OpArgs a;
      a.peer = 1;
      a.tag = 5;
      a.timeout_ms = 500;  // far below the group's 20 s
      const auto start = Clock::now();
      std::string err;
      r.expect_status(r.run(make_op(PG_OP_RECV, absent(), cpu(&y, 1, PG_DTYPE_F32), a), &err),
                      PG_ERR_TIMEOUT, "unanswered recv");
      const int64_t took = ms_since(start);
      r.expect(took >= 400 && took < 3000, "timed out after " + std::to_string(took) + " ms");
      r.expect(err.rfind("recv #1: timed out waiting for rank 1 (timeout 500 ms)", 0) == 0,
               "message: " + err);
      r.store->put("done", "1");
    } else {
      std::string v;
      r.expect(r.store->fetch("done", 10000, &v), "rank 0 timed out");
    }
  });
}

TEST(GlooFailure, RendezvousWithoutPeersTimesOut) {
  WorldOptions opts;
  opts.create_group = false;
  run_world(2, opts, [](RankEnv& r) {
    if (r.rank != 0) return;  // rank 1 never shows up
    const auto start = Clock::now();
    pg_backend_group_t g = nullptr;
    const pg_status_t st = create_group(*r.ops, *r.store, 0, 2, 1000, &g);
    const std::string err = take_error();
    r.expect_status(st, PG_ERR_TIMEOUT, "group_create alone: " + err);
    r.expect(err.find("rendezvous") != std::string::npos, "message: " + err);
    r.expect(ms_since(start) < 5000, "gave up after " + std::to_string(ms_since(start)) + " ms");
  });
}

TEST(GlooFailure, DestroyWithAReleasedPendingWorkIsPrompt) {
  run_world(2, {}, [](RankEnv& r) {
    if (r.rank == 0) {
      float y = 0;
      OpArgs a;
      a.peer = 1;
      a.tag = 3;
      Work w = r.start(make_op(PG_OP_RECV, absent(), cpu(&y, 1, PG_DTYPE_F32), a));
      w.release();  // never matched; the group must still go away promptly
      const auto start = Clock::now();
      r.expect_status(r.ops->group_destroy(r.group), PG_OK, "destroy");
      r.group = nullptr;
      r.expect(ms_since(start) < 2000, "destroy took " + std::to_string(ms_since(start)));
      r.store->put("destroyed", "1");
    } else {
      std::string v;
      r.expect(r.store->fetch("destroyed", 10000, &v), "rank 0 destroyed its group");
    }
  });
}

}  // namespace
}  // namespace procgroup::gloo_test
