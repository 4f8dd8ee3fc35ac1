// Failures of the ucx plugin: a killed peer, a peer that never calls, group_abort from
// another thread, operations after a failure, destroying a group with work pending. Each
// must end every wait with the right status and a message naming operation, seq and rank,
// well within the group timeout (20 s here; the bounds below are a fraction of it).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ucx_test_support.h"
#include "ucx_values.h"

namespace procgroup::ucx_test {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A small (recursive doubling) and a large (pipelined ring) allreduce; over shared memory
// the peer's pidfd reports the death, over TCP UCX's own error handling does.
class KilledPeer : public ::testing::TestWithParam<const char*> {};

TEST_P(KilledPeer, FailsTheOthersWithPeerLost) {
  for (const uint64_t n : {uint64_t{16}, uint64_t{1} << 20}) {
    WorldOptions options;
    options.killed = {2};
    const std::string param = GetParam();
    if (param == "lazy") {
      options.env = {{"PROCGROUP_UCX_CONNECT_ALL_MAX", "0"}};  // pidfds opened on first use
    } else if (!param.empty()) {
      options.env = {{"UCX_TLS", param}};
    }
    run_world(3, options, [n](RankEnv& env) {
      std::vector<float> data(n, 1.0f);
      pg_buffer_t b = cpu(data.data(), n, PG_DTYPE_F32);
      env.expect_status(env.run(make_op(PG_OP_BARRIER, absent(), absent())), PG_OK, "barrier");
      if (env.rank == 2) {
        usleep(100 * 1000);
        kill(getpid(), SIGKILL);
      }
      const auto t0 = Clock::now();
      std::string error;
      const pg_status_t st = env.run(make_op(PG_OP_ALLREDUCE, b, b), &error);
      env.expect_status(st, PG_ERR_PEER_LOST, "allreduce with a dead peer");
      env.expect(contains(error, "allreduce #2") && contains(error, "rank 2"),
                 "the message names the op, its seq and the dead rank: " + error);
      env.expect(seconds_since(t0) < 5, "noticed in " + std::to_string(seconds_since(t0)) + " s");
      // The group is broken: later operations fail at once, quoting the first failure.
      Work later = env.start(make_op(PG_OP_ALLREDUCE, b, b));
      env.expect_status(later.submit_status(), PG_ERR_ABORTED, "an allreduce after the failure");
      env.expect(contains(later.error(), "rank 2"), "quotes the cause: " + later.error());
    });
  }
}

INSTANTIATE_TEST_SUITE_P(UcxFailure, KilledPeer, ::testing::Values("", "lazy", "tcp,self"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           const std::string v = p.param;
                           return std::string(v.empty()     ? "SharedMemory"
                                              : v == "lazy" ? "SharedMemoryLazy"
                                                            : "Tcp");
                         });

TEST(UcxFailure, SilentPeerTimesOutNamingIt) {
  WorldOptions options;
  options.timeout_ms = 1500;
  run_world(2, options, [](RankEnv& env) {
    int32_t x = 1;
    pg_buffer_t b = cpu(&x, 1, PG_DTYPE_I32);
    if (env.rank == 1) {
      usleep(4000 * 1000);  // alive, but joins the allreduce only after the timeout
      Work late = env.start(make_op(PG_OP_ALLREDUCE, b, b));
      env.expect(late.wait() != PG_OK, "the late rank's allreduce fails too");
      return;
    }
    const auto t0 = Clock::now();
    std::string error;
    const pg_status_t st = env.run(make_op(PG_OP_ALLREDUCE, b, b), &error);
    env.expect_status(st, PG_ERR_TIMEOUT, "allreduce with a silent peer");
    env.expect(contains(error, "allreduce #1 timed out after 1500 ms waiting for rank 1"),
               "message: " + error);
    const double took = seconds_since(t0);
    env.expect(took > 1.4 && took < 6, "ended after " + std::to_string(took) + " s");
  });
}

// Rank 0's barrier has a short timeout, rank 1's the group's; rank 2 is silent. Rank 1
// learns of rank 0's timeout from its notice, long before its own: it fails the same way
// (PG_ERR_TIMEOUT, as on gloo, where each survivor sees the timeout itself), naming the
// op, its seq and the rank neither heard from.
TEST(UcxFailure, PeersOfATimedOutRankGetTimeoutToo) {
  run_world(3, {}, [](RankEnv& env) {
    if (env.rank == 2) {
      usleep(3000 * 1000);
      env.expect(env.run(make_op(PG_OP_BARRIER, absent(), absent())) != PG_OK,
                 "the silent rank's late barrier fails");
      return;
    }
    OpArgs a;
    a.timeout_ms = env.rank == 0 ? 500 : 0;
    const auto t0 = Clock::now();
    std::string error;
    const pg_status_t st = env.run(make_op(PG_OP_BARRIER, absent(), absent(), a), &error);
    env.expect_status(st, PG_ERR_TIMEOUT, "a barrier that rank 2 never joins");
    env.expect(contains(error, "barrier #1") && contains(error, "waiting for rank 2"),
               "names op, seq and the rank not heard from: " + error);
    if (env.rank == 1) {
      env.expect(contains(error, "rank 0 failed: barrier #1 timed out after 500 ms"),
                 "quotes rank 0's timeout: " + error);
    }
    const double took = seconds_since(t0);
    env.expect(took > 0.45 && took < 3, "ended after " + std::to_string(took) + " s");
    Work later = env.start(make_op(PG_OP_BARRIER, absent(), absent()));
    env.expect_status(later.submit_status(), PG_ERR_ABORTED, "a barrier after the timeout");
  });
}

// A store that fails (rank 0, its host, died) is named as the cause, with the status it
// returned, not the peer whose key was being read; a key that never appears names the peer.
TEST(UcxFailure, StoreFailuresBlameTheStoreAndMissingKeysThePeer) {
  WorldOptions options;
  options.create_group = false;
  options.timeout_ms = 500;
  run_world(2, options, [](RankEnv& env) {
    if (env.rank == 1) return;  // never joins: rank 0's wait for its key times out
    pg_backend_group_t group = nullptr;
    pg_status_t st = create_group(*env.ops, *env.store, 0, 2, 500, &group);
    std::string error = take_error();  // taken: the store case below must not see it
    env.expect_status(st, PG_ERR_TIMEOUT, "a rank that never published");
    env.expect(contains(error, "rank 1 never published its host identity within 500 ms"),
               "names the missing rank: " + error);
    pg_host_store_t gone = *env.store->get();
    gone.get = [](void*, const char*, int64_t, void**, uint64_t*) {
      return pg_status_t{PG_ERR_STORE};
    };
    pg_backend_group_config_t c{};
    c.struct_size = sizeof(c);
    c.size = 2;
    c.local_size = 2;
    c.device_type = -1;
    c.timeout_ms = 500;
    c.store = &gone;
    c.group_id = "gone";
    c.master_addr = "10.1.2.3";
    st = env.ops->group_create(&c, &group);
    error = take_error();
    env.expect_status(st, PG_ERR_STORE, "a store that went away");
    env.expect(contains(error, "the store at 10.1.2.3 (hosted by rank 0) went away") &&
                   !contains(error, "never published"),
               "blames the store on rank 0: " + error);
  });
}

TEST(UcxFailure, AbortFromAnotherThreadEndsWaitsHereAndThere) {
  run_world(2, {}, [](RankEnv& env) {
    int32_t x = 0;
    pg_buffer_t b = cpu(&x, 1, PG_DTYPE_I32);
    OpArgs a;
    a.peer = 1 - env.rank;
    // Each rank waits for a message the other never sends.
    Work w = env.start(make_op(PG_OP_RECV, absent(), b, a));
    const auto t0 = Clock::now();
    std::thread aborter;
    if (env.rank == 0) {
      aborter = std::thread([&] {
        usleep(300 * 1000);
        env.expect_status(env.ops->group_abort(env.group), PG_OK, "group_abort");
      });
    }
    const pg_status_t st = w.wait();
    const double took = seconds_since(t0);
    if (aborter.joinable()) aborter.join();
    env.expect_status(st, PG_ERR_ABORTED, "the pending recv");
    env.expect(contains(w.error(), "recv #1"), "message: " + w.error());
    if (env.rank == 0) {
      env.expect(contains(w.error(), "group_abort"), "message: " + w.error());
    } else {
      env.expect(contains(w.error(), "rank 0"), "names the aborting rank: " + w.error());
    }
    env.expect(took < 3, "ended after " + std::to_string(took) + " s, not at the timeout");
  });
}

TEST(UcxFailure, DestroyWithPendingWorkFailsIt) {
  run_world(2, {}, [](RankEnv& env) {
    int32_t x = 0;
    pg_buffer_t b = cpu(&x, 1, PG_DTYPE_I32);
    OpArgs a;
    a.peer = 1 - env.rank;
    a.tag = 99;
    Work w = env.start(make_op(PG_OP_RECV, absent(), b, a));
    env.expect_status(w.test(), PG_PENDING, "nothing was sent yet");
    // Neither rank destroys before the other has seen its recv pending: a peer's destroy
    // fails this rank's recv at once (its notice), or its group_create if it came first.
    env.store->put("test/pending/" + std::to_string(env.rank), "1");
    std::string ignored;
    env.expect(env.store->fetch("test/pending/" + std::to_string(1 - env.rank), 10000, &ignored),
               "the peer's recv was never seen pending");
    const auto t0 = Clock::now();
    env.expect_status(env.ops->group_destroy(env.group), PG_OK, "group_destroy");
    env.group = nullptr;
    env.expect(seconds_since(t0) < 3, "destroy took " + std::to_string(seconds_since(t0)) + " s");
    // The handle outlives the group and reports how its work ended.
    env.expect_status(w.test(), PG_ERR_ABORTED, "the pending recv after destroy");
    env.expect(contains(w.error(), "destroyed"), "message: " + w.error());
  });
}

// What this process writes to stdout and stderr while f runs (UCX logs there).
template <class F>
std::string output_of(F&& f) {
  char path[] = "/tmp/ucx_output_XXXXXX";
  const int fd = mkstemp(path);
  fflush(stdout);
  fflush(stderr);
  const int out = dup(1), err = dup(2);
  dup2(fd, 1);
  dup2(fd, 2);
  f();
  fflush(stdout);
  fflush(stderr);
  dup2(out, 1);
  dup2(err, 2);
  close(out);
  close(err);
  close(fd);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  unlink(path);
  return text.str();
}

// A rendezvous send nobody receives, then group_abort: UCX can neither complete nor
// cancel it, so it stays with the worker. Destroying the group releases it quietly (UCX
// used to warn "object ... was not returned to mpool ucp_requests" on every such abort).
TEST(UcxFailure, AbortWithATransferInFlightLeavesNoWarning) {
  run_world(2, {}, [](RankEnv& env) {
    std::vector<float> data(1 << 20, 1.0f);
    OpArgs a;
    a.peer = 1;
    Work w;
    if (env.rank == 0) {
      w = env.start(make_op(PG_OP_SEND, cpu(data.data(), data.size(), PG_DTYPE_F32), absent(), a));
      usleep(200 * 1000);  // the rendezvous request is out
      env.expect_status(env.ops->group_abort(env.group), PG_OK, "group_abort");
      env.expect_status(w.wait(), PG_ERR_ABORTED, "the send");
    } else {
      usleep(400 * 1000);  // rank 0's abort notice arrives meanwhile
    }
    const std::string said = output_of(
        [&] { env.expect_status(env.ops->group_destroy(env.group), PG_OK, "group_destroy"); });
    env.group = nullptr;
    env.expect(!contains(said, "mpool") && !contains(said, "not returned"),
               "destroy printed: " + said);
  });
}

TEST(UcxFailure, PerOperationTimeout) {
  run_world(2, {}, [](RankEnv& env) {
    int32_t x = 0;
    pg_buffer_t b = cpu(&x, 1, PG_DTYPE_I32);
    OpArgs a;
    a.peer = 1 - env.rank;
    a.timeout_ms = 300;
    const auto t0 = Clock::now();
    std::string error;
    const pg_status_t st = env.run(make_op(PG_OP_RECV, absent(), b, a), &error);
    env.expect(st == PG_ERR_TIMEOUT || st == PG_ERR_ABORTED, std::string(status_name(st)));
    env.expect(contains(error, "recv #1"), "message: " + error);
    const double took = seconds_since(t0);
    env.expect(took > 0.25 && took < 2.5, "ended after " + std::to_string(took) + " s");
  });
}

}  // namespace
}  // namespace procgroup::ucx_test
