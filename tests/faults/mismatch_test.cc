// Count mismatches between ranks, without PROCGROUP_DEBUG (the always-on check) and with it.
// Gloo itself asserts, and so aborts the receiving process, when a message is larger than
// the receive posted for it, and silently delivers a shorter one. The backend must turn
// both into errors: a send/recv of different sizes is PG_ERR_MISMATCH on the receiver with
// nothing written and the group still usable; a collective with different counts never
// aborts, never writes out of bounds, and fails on the ranks that disagree within two
// timeouts. With PROCGROUP_DEBUG=detail every rank gets PG_ERR_MISMATCH before any data moves.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "fault_run.h"

namespace procgroup::testing {
namespace {

constexpr int kTimeoutS = 4;

void expect_no_crash(const FaultRun& run, int nproc) {
  const std::string log = run.log();
  EXPECT_EQ(log.find("terminate called"), std::string::npos) << "a rank aborted";
  EXPECT_EQ(log.find("CORRUPT"), std::string::npos) << "a rank wrote past its buffer";
  EXPECT_EQ(log.find("killed by signal"), std::string::npos) << "a rank died of a signal";
  for (int r = 0; r < nproc; ++r) {
    EXPECT_NE(run.find("EXIT", r), nullptr) << "rank " << r << " crashed or hung";
  }
}

// Two ranks of backend running fault_worker with args, timeout kTimeoutS.
FaultRun run_pair(const std::string& backend, std::vector<std::string> args) {
  RunSpec spec;
  spec.backend = backend;
  spec.nproc = 2;
  spec.timeout_s = kTimeoutS;
  spec.args = std::move(args);
  return run_workers(spec);
}

using P2pParam = std::tuple<std::string, std::string>;  // backend, smaller|larger
class P2pMismatch : public ::testing::TestWithParam<P2pParam> {};

TEST_P(P2pMismatch, IsAnErrorOnTheReceiverAndTheGroupStaysUsable) {
  const auto& [backend, which] = GetParam();
  FaultRun run =
      run_pair(backend, {"p2p-mismatch", "--victim", "1", "--op", which, "--survive-sigterm"});
  SCOPED_TRACE(run.log());
  expect_no_crash(run, 2);
  const WorkerLine* send = run.find("RESULT", 0);
  const WorkerLine* recv = run.find("RESULT", 1);
  ASSERT_NE(send, nullptr);
  ASSERT_NE(recv, nullptr);
  EXPECT_EQ(recv->field("status"), "PG_ERR_MISMATCH");
  if (backend == "ucx") {
    // ucx sends no header: it compares the sizes in bytes.
    const std::string expects = which == "smaller" ? "recv of 2000 bytes" : "recv of 8000 bytes";
    EXPECT_NE(recv->msg.find("rank 0 sent 4000 bytes"), std::string::npos) << recv->msg;
    EXPECT_NE(recv->msg.find(expects + " from rank 0"), std::string::npos) << recv->msg;
  } else {
    const std::string expects = which == "smaller" ? "f32 x 500" : "f32 x 2000";
    EXPECT_NE(recv->msg.find("rank 0 sent f32 x 1000"), std::string::npos) << recv->msg;
    EXPECT_NE(recv->msg.find("expects " + expects), std::string::npos) << recv->msg;
  }
  EXPECT_LT(recv->number("took_ms"), 2000) << "found at once, not by a timeout";
  EXPECT_EQ(send->field("status"), "PG_OK");
  for (int r = 0; r < 2; ++r) {
    const WorkerLine* next = run.find("NEXT", r);
    ASSERT_NE(next, nullptr);
    EXPECT_EQ(next->field("status"), "PG_OK") << "the group must stay usable: " << next->msg;
  }
}

std::string p2p_name(const ::testing::TestParamInfo<P2pParam>& info) {
  return std::get<0>(info.param) + "_recv_" + std::get<1>(info.param);
}

INSTANTIATE_TEST_SUITE_P(Backends, P2pMismatch,
                         ::testing::Combine(::testing::ValuesIn(process_backends()),
                                            ::testing::Values("smaller", "larger")),
                         p2p_name);

using CollParam = std::tuple<std::string, std::string, bool>;  // backend, op, detail
class CollectiveMismatch : public ::testing::TestWithParam<CollParam> {};

TEST_P(CollectiveMismatch, NeverAbortsAndFailsTheRanksThatDisagree) {
  const auto& [backend, op, detail] = GetParam();
  RunSpec spec;
  spec.backend = backend;
  spec.nproc = 3;
  spec.timeout_s = kTimeoutS;
  spec.kill_grace_s = 2 * kTimeoutS + 4;
  spec.args = {"coll-mismatch", "--victim", "1", "--op", op, "--survive-sigterm"};
  if (detail) spec.env = {"PROCGROUP_DEBUG=detail"};
  FaultRun run = run_workers(spec);
  SCOPED_TRACE(run.log());
  expect_no_crash(run, 3);
  const WorkerLine* victim = run.find("RESULT", 1);
  ASSERT_NE(victim, nullptr);
  EXPECT_NE(victim->field("status"), "PG_OK") << "the rank with another count must fail";
  for (int r = 0; r < 3; ++r) {
    const WorkerLine* later = run.find("LATER", r);
    // A failed group answers at once; no hang report for an abort that a mismatch explains.
    if (later != nullptr) {
      EXPECT_LT(later->number("took_ms"), 500) << "rank " << r << " " << later->msg;
    }
  }
  EXPECT_LE(victim->number("took_ms"), 2 * kTimeoutS * 1000);
  if (detail) {
    // Every rank learns it, naming the rank that differs, before any data moved.
    for (int r = 0; r < 3; ++r) {
      const WorkerLine* res = run.find("RESULT", r);
      ASSERT_NE(res, nullptr);
      EXPECT_EQ(res->field("status"), "PG_ERR_MISMATCH") << res->msg;
      EXPECT_NE(res->msg.find("rank 1 called " + op), std::string::npos) << res->msg;
      EXPECT_NE(res->msg.find("as op #1"), std::string::npos) << res->msg;
      EXPECT_LT(res->number("took_ms"), 2000);
    }
  } else {
    // Every rank sits in the same operation number with other arguments: at the timeout
    // the hang report calls it what it is.
    if (op == "allreduce") {
      EXPECT_EQ(victim->field("status"), "PG_ERR_MISMATCH") << victim->msg;
    }
    EXPECT_NE(victim->msg.find(op + " #1"), std::string::npos) << victim->msg;
    EXPECT_NE(victim->msg.find("1500"), std::string::npos)
        << "the message says what this rank passed: " << victim->msg;
  }
}

std::string coll_name(const ::testing::TestParamInfo<CollParam>& info) {
  return std::get<0>(info.param) + "_" + std::get<1>(info.param) +
         (std::get<2>(info.param) ? "_detail" : "_plain");
}

const std::string kOps[] = {"allreduce", "broadcast", "allgather", "reduce_scatter", "alltoall"};

// The always-on check is the backend's: gloo's tag hash and hang report, ucx's check of
// every received length (found at once, on the rank that received the other size).
INSTANTIATE_TEST_SUITE_P(AlwaysOn, CollectiveMismatch,
                         ::testing::Combine(::testing::ValuesIn(process_backends()),
                                            ::testing::ValuesIn(kOps), ::testing::Values(false)),
                         coll_name);

// PROCGROUP_DEBUG=detail is the core's, the same on every backend.
INSTANTIATE_TEST_SUITE_P(Detail, CollectiveMismatch,
                         ::testing::Combine(::testing::ValuesIn(process_backends()),
                                            ::testing::ValuesIn(kOps), ::testing::Values(true)),
                         coll_name);

// Same sizes, other arguments, without PROCGROUP_DEBUG: ucx compares the fingerprint each
// message carries, so every rank of a collective fails with PG_ERR_MISMATCH at once (the
// root of a broadcast by its receivers' confirmations), none with PG_OK and mixed data;
// a recv of another dtype fails only the recv. (Gloo finds these at the timeout.)
class ArgsMismatch : public ::testing::TestWithParam<std::string> {};

TEST_P(ArgsMismatch, EveryRankOfTheCollectiveFailsAtOnce) {
  const std::string what = GetParam();
  const auto backends = process_backends();
  if (std::find(backends.begin(), backends.end(), "ucx") == backends.end())
    GTEST_SKIP() << "the ucx backend is not built";
  FaultRun run =
      run_pair("ucx", {"args-mismatch", "--victim", "1", "--op", what, "--survive-sigterm"});
  SCOPED_TRACE(run.log());
  expect_no_crash(run, 2);
  for (int r = 0; r < 2; ++r) {
    const WorkerLine* res = run.find("RESULT", r);
    ASSERT_NE(res, nullptr);
    const bool sender = what == "p2p_dtype" && r == 0;
    EXPECT_EQ(res->field("status"), sender ? "PG_OK" : "PG_ERR_MISMATCH") << "rank " << r;
    EXPECT_LT(res->number("took_ms"), 2000) << "found at once, not by a timeout";
    const WorkerLine* later = run.find("LATER", r);
    if (later != nullptr) EXPECT_NE(later->field("status"), "PG_OK");
    const WorkerLine* next = run.find("NEXT", r);
    if (what == "p2p_dtype") {
      ASSERT_NE(next, nullptr);
      EXPECT_EQ(next->field("status"), "PG_OK") << "the group stays usable: " << next->msg;
    }
  }
  const std::string says = what == "reduce_op"     ? "reduce op"
                           : what == "dtype"       ? "dtype"
                           : what == "root"        ? "different roots"
                           : what == "bcast_count" ? "different counts"
                                                   : "dtype f32 where this rank passed i32";
  EXPECT_NE(run.find("RESULT", 1)->msg.find(says), std::string::npos);
  // Nothing of the other rank's call reached a result: both keep their own data.
  if (what == "reduce_op") {
    EXPECT_EQ(run.find("DATA", 0)->field("f"), "1.000000,2.000000");
    EXPECT_EQ(run.find("DATA", 1)->field("f"), "9.000000,2.000000");
  }
}

INSTANTIATE_TEST_SUITE_P(AlwaysOnUcx, ArgsMismatch,
                         ::testing::Values("reduce_op", "dtype", "root", "bcast_count",
                                           "p2p_dtype"));

// Gloo finds a dtype mismatch only at the timeout, by the hang report. When one rank times
// out first, Gloo closes its connections and the other sees a lost peer before its own
// timeout: it still publishes its state, so the first rank's report names the mismatch.
TEST(HangReportMismatch, ARankThatLostThePeerStillTellsTheRankThatTimedOut) {
  FaultRun run = run_pair("gloo", {"args-mismatch", "--victim", "1", "--op", "dtype", "--late-ms",
                                   "700", "--survive-sigterm"});
  SCOPED_TRACE(run.log());
  expect_no_crash(run, 2);
  const WorkerLine* first = run.find("RESULT", 1);  // entered 700 ms earlier: times out first
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->field("status"), "PG_ERR_MISMATCH") << first->msg;
  EXPECT_NE(first->msg.find("different arguments"), std::string::npos) << first->msg;
  const WorkerLine* late = run.find("RESULT", 0);
  ASSERT_NE(late, nullptr);
  EXPECT_NE(late->field("status"), "PG_OK");
}

// PROCGROUP_DEBUG=detail on one rank only: every collective would wait for a fingerprint
// exchange the other rank never joins. Group creation compares the setting instead.
class SettingsMismatch : public ::testing::TestWithParam<std::string> {};

TEST_P(SettingsMismatch, DebugOnOneRankFailsCreationOnEveryRank) {
  FaultRun run = run_pair(GetParam(), {"healthy", "--debug-rank", "1", "--survive-sigterm"});
  SCOPED_TRACE(run.log());
  expect_no_crash(run, 2);
  for (int r = 0; r < 2; ++r) {
    const WorkerLine* res = run.find("RESULT", r);
    ASSERT_NE(res, nullptr);
    EXPECT_EQ(res->field("op"), "create");
    EXPECT_EQ(res->field("status"), "PG_ERR_CONFIG") << res->msg;
    EXPECT_NE(res->msg.find("PROCGROUP_DEBUG differs between ranks: rank 0 'off', rank 1 "
                            "'detail'"),
              std::string::npos)
        << res->msg;
    EXPECT_LT(res->number("took_ms"), 2000) << "at once, not at a timeout";
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, SettingsMismatch, ::testing::ValuesIn(process_backends()));

// Rank 1 on another backend: without the comparison each side waits for the other's
// backend to connect until the timeout.
TEST(SettingsMismatch, BackendOnOneRankFailsCreationOnEveryRank) {
  const auto backends = process_backends();
  if (backends.size() < 2) GTEST_SKIP() << "needs two process backends";
  FaultRun run = run_pair(
      backends[0], {"healthy", "--other-backend", "1", backends[1].c_str(), "--survive-sigterm"});
  SCOPED_TRACE(run.log());
  expect_no_crash(run, 2);
  const std::string says =
      "backend differs between ranks: rank 0 '" + backends[0] + "', rank 1 '" + backends[1] + "'";
  for (int r = 0; r < 2; ++r) {
    const WorkerLine* res = run.find("RESULT", r);
    ASSERT_NE(res, nullptr);
    EXPECT_EQ(res->field("status"), "PG_ERR_CONFIG") << res->msg;
    EXPECT_NE(res->msg.find(says), std::string::npos) << res->msg;
    EXPECT_LT(res->number("took_ms"), 2000) << "at once, not at a timeout";
  }
}

}  // namespace
}  // namespace procgroup::testing
