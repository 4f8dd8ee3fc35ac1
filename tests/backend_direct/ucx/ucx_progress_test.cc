// The ucx plugin's progress model: works complete with nobody waiting on them (the progress
// thread, also right after a blocking loop), a waiter that blocks does not burn a core, a wait with
// its own timeout returns PG_PENDING and the work goes on, several threads wait on one group's
// works at once, ranks pinned to one CPU still agree.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "ucx_cases.h"
#include "ucx_test_support.h"
#include "ucx_values.h"

namespace procgroup::ucx_test {
namespace {

using Clock = std::chrono::steady_clock;

TEST(UcxProgress, WorksCompleteWithoutAWaiter) {
  run_world(2, {}, [](RankEnv& env) {
    // A small and a large (pipelined, rendezvous) allreduce, then nobody touches them.
    Pending small = start_case(env, Case{PG_OP_ALLREDUCE, PG_DTYPE_F32, PG_REDUCE_SUM, 7});
    Pending large = start_case(env, Case{PG_OP_ALLREDUCE, PG_DTYPE_F32, PG_REDUCE_SUM, 3 << 20});
    // Each test() polls once, far too little to move 12 MiB in 1 MiB chunks: done here
    // means the progress thread did it. Three looks, for hosts busy with other work.
    bool done = false;
    for (int sleep_ms : {1500, 3000, 5000}) {
      usleep(sleep_ms * 1000);
      if ((done = small.work.test() == PG_OK && large.work.test() == PG_OK)) break;
    }
    env.expect(done, "both allreduces finished with nobody waiting on them");
    env.expect(finish_case(env, small).empty(), "small result");
    env.expect(finish_case(env, large).empty(), "large result");
  });
}

// After a loop of blocking allreduces the progress thread looks less often (its wakes cost
// such loops a few percent): it must still take over an allreduce the caller leaves alone.
TEST(UcxProgress, WorkLeftAloneAfterABlockingLoopStillCompletes) {
  run_world(2, {}, [](RankEnv& env) {
    const Case big{PG_OP_ALLREDUCE, PG_DTYPE_F32, PG_REDUCE_SUM, 256 << 10};  // 1 MiB: windows
    for (int i = 0; i < 200; ++i) {
      Pending p = start_case(env, big);
      env.expect_status(p.work.wait(), PG_OK, "blocking allreduce");
    }
    // Rank 1 comes late, so rank 0's part of the allreduce is left to rank 0's thread.
    if (env.rank == 1) usleep(200 * 1000);
    Pending left = start_case(env, big);
    const auto t0 = Clock::now();
    if (env.rank == 0) {
      usleep(1500 * 1000);  // rank 1's wait needs our progress thread meanwhile
    } else {
      env.expect_status(left.work.wait(), PG_OK, "the allreduce rank 0 leaves alone");
      const double took = std::chrono::duration<double>(Clock::now() - t0).count();
      env.expect(took < 0.5, "rank 1 waited " + std::to_string(took) +
                                 " s: rank 0's progress thread did not take over");
    }
    env.expect(finish_case(env, left).empty(), "result");
  });
}

TEST(UcxProgress, BlockedWaitSleepsInsteadOfSpinning) {
  run_world(2, {}, [](RankEnv& env) {
    int32_t x = 5;
    pg_buffer_t b = cpu(&x, 1, PG_DTYPE_I32);
    OpArgs a;
    a.peer = 1 - env.rank;
    if (env.rank == 0) {
      usleep(1500 * 1000);
      env.expect_status(env.run(make_op(PG_OP_SEND, b, absent(), a)), PG_OK, "late send");
      return;
    }
    x = 0;
    const double cpu0 = process_cpu_seconds();
    const auto t0 = Clock::now();
    env.expect_status(env.run(make_op(PG_OP_RECV, absent(), b, a)), PG_OK, "recv");
    const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
    const double used = process_cpu_seconds() - cpu0;
    env.expect(x == 5, "received");
    env.expect(waited > 1.0, "the recv waited for the late send");
    // Spinning would cost ~1 CPU-second per second waited; blocking on the event fd a few ms.
    env.expect(used < 0.25 * waited,
               "CPU " + std::to_string(used) + " s while waiting " + std::to_string(waited) + " s");
  });
}

TEST(UcxProgress, WaitWithItsOwnTimeoutLeavesTheWorkRunning) {
  run_world(2, {}, [](RankEnv& env) {
    int64_t x = env.rank == 0 ? 42 : 0;
    pg_buffer_t b = cpu(&x, 1, PG_DTYPE_I64);
    OpArgs a;
    a.peer = 1 - env.rank;
    if (env.rank == 0) {
      usleep(400 * 1000);
      env.expect_status(env.run(make_op(PG_OP_SEND, b, absent(), a)), PG_OK, "send");
      return;
    }
    Work w = env.start(make_op(PG_OP_RECV, absent(), b, a));
    const auto t0 = Clock::now();
    env.expect_status(w.wait(50), PG_PENDING, "a 50 ms wait");
    const double took = std::chrono::duration<double>(Clock::now() - t0).count();
    env.expect(took >= 0.045 && took < 2, "the wait took " + std::to_string(took) + " s");
    env.expect_status(w.wait(), PG_OK, "the full wait");
    env.expect(x == 42, "received");
  });
}

TEST(UcxProgress, ManyThreadsWaitOnOneGroup) {
  run_world(3, {}, [](RankEnv& env) {
    // One thread issues (collectives must be issued in the same order everywhere), each
    // work is waited on by its own thread, in reverse order of issue.
    constexpr int kOps = 12;
    std::vector<Pending> ops;
    for (int i = 0; i < kOps; ++i) {
      const uint64_t n = i % 3 == 0 ? (1u << 18) + i : 13 + i;
      ops.push_back(start_case(
          env, Case{i % 2 ? PG_OP_ALLREDUCE : PG_OP_ALLGATHER, PG_DTYPE_F32, PG_REDUCE_SUM, n}));
    }
    std::vector<std::string> results(kOps);
    std::vector<std::thread> waiters;
    for (int i = kOps - 1; i >= 0; --i) {
      waiters.emplace_back([&, i] { results[i] = finish_case(env, ops[i]); });
    }
    for (std::thread& t : waiters) t.join();
    for (const std::string& r : results) env.expect(r.empty(), r);
  });
}

TEST(UcxProgress, RanksPinnedToOneCpuStillAgree) {
  // Two ranks on one CPU (bound so, or placed so by the scheduler on a busy machine): a
  // waiter yields at once to the peer it would otherwise spin against (ucx_progress.cc).
  // Small allreduces (the shared-memory slots) and large ones (the windows) still agree.
  cpu_set_t mask;
  ASSERT_EQ(sched_getaffinity(0, sizeof(mask), &mask), 0);
  int cpu = 0;
  while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &mask)) ++cpu;
  ASSERT_LT(cpu, CPU_SETSIZE);
  run_world(2, {}, [cpu](RankEnv& env) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    env.expect(sched_setaffinity(0, sizeof(one), &one) == 0,
               "pinned to CPU " + std::to_string(cpu));
    for (int i = 0; i < 300; ++i) {
      const uint64_t n = i % 50 == 49 ? (1u << 19) + i : 1 + i % 13;
      Pending p = start_case(env, Case{PG_OP_ALLREDUCE, PG_DTYPE_F32, PG_REDUCE_SUM, n});
      const std::string bad = finish_case(env, p);
      env.expect(bad.empty(), "allreduce " + std::to_string(i) + ": " + bad);
      if (!bad.empty()) break;
    }
  });
}

}  // namespace
}  // namespace procgroup::ucx_test
