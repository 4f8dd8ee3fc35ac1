// The fault matrix (DESIGN.md §6) with real processes through pgrun, for every process
// backend: a rank SIGKILLed during rendezvous, during a large collective and between
// collectives, or SIGSTOPped before a collective; the victim is rank 1, or rank 0, which
// hosts the store. The survivors must return an error on their own (they ignore pgrun's
// SIGTERM for that) within two group timeouts, naming the operation, its sequence number
// and the rank not heard from; a later call must fail at once naming the first failure;
// pgrun must exit non-zero with no rank left behind.
#include <gtest/gtest.h>

#include <cstdio>
#include <ostream>
#include <string>
#include <tuple>

#include "fault_run.h"

namespace procgroup::testing {
namespace {

constexpr int kTimeoutS = 4;  // PROCGROUP_TIMEOUT
constexpr int kRanks = 3;

struct Case {
  const char* phase;  // fault_worker scenario
  const char* op;     // what the survivors' message must name
};

const Case kCases[] = {{"rendezvous", ""},
                       {"large", "allreduce #2"},
                       {"between", "allreduce #2"},
                       {"stop", "allreduce #2"}};

// For test names in ctest's output instead of the struct's bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.phase; }

using Param = std::tuple<std::string, Case, int>;  // backend, case, victim

class FaultMatrix : public ::testing::TestWithParam<Param> {};

bool names_rendezvous(const std::string& msg) {
  return msg.find("creating group") != std::string::npos ||
         msg.find("rendezvous") != std::string::npos || msg.find("store") != std::string::npos;
}

TEST_P(FaultMatrix, SurvivorsFailFastAndClearly) {
  const auto& [backend, c, victim] = GetParam();
  RunSpec spec;
  spec.backend = backend;
  spec.nproc = kRanks;
  spec.timeout_s = kTimeoutS;
  spec.kill_grace_s = 2 * kTimeoutS + 4;  // survivors finish on their own first
  spec.args = {c.phase, "--victim", std::to_string(victim), "--survive-sigterm"};
  FaultRun run = run_workers(spec);
  const std::string log = run.log();
  SCOPED_TRACE(log);

  ASSERT_FALSE(run.pgrun.timed_out) << "pgrun did not finish";
  EXPECT_NE(run.pgrun.exit_code, 0) << "pgrun must report the failure";
  const int64_t fault = run.fault_ms();
  ASSERT_GT(fault, 0) << "the victim never reached its fault";
  EXPECT_EQ(log.find("CORRUPT"), std::string::npos);
  EXPECT_EQ(log.find("terminate called"), std::string::npos);

  for (int r = 0; r < kRanks; ++r) {
    if (r == victim) continue;
    SCOPED_TRACE("survivor rank " + std::to_string(r));
    const WorkerLine* result = run.find("RESULT", r);
    ASSERT_NE(result, nullptr) << "no result: it hung or crashed";
    EXPECT_NE(result->field("status"), "PG_OK") << "the fault went unnoticed";
    if (backend == "ucx" && std::string(c.phase) == "stop") {
      // Also on a survivor that a peer's notice told first: a timeout, as on gloo.
      EXPECT_EQ(result->field("status"), "PG_ERR_TIMEOUT") << result->msg;
    }
    const int64_t detect_ms = result->number("t_ms") - fault;
    // One line per survivor for the table in docs/reliability.md.
    std::printf("MATRIX %s %s victim=%d rank=%d %s %.2f s: %s\n", backend.c_str(), c.phase,
                victim, r, result->field("status").c_str(),
                static_cast<double>(detect_ms) / 1000, result->msg.c_str());
    EXPECT_LE(detect_ms, 2 * kTimeoutS * 1000) << "noticed " << detect_ms << " ms after the fault";
    const std::string& msg = result->msg;
    if (std::string(c.phase) == "rendezvous") {
      EXPECT_TRUE(names_rendezvous(msg)) << "names the operation: " << msg;
    } else {
      EXPECT_NE(msg.find(c.op), std::string::npos) << "names the operation and seq: " << msg;
    }
    EXPECT_NE(msg.find("rank " + std::to_string(victim)), std::string::npos)
        << "names the rank not heard from: " << msg;
    if (result->field("status") == "PG_ERR_STORE") {
      // Whatever words the backend used, the store's address reaches the user.
      EXPECT_NE(msg.find("127.0.0.1:"), std::string::npos) << "names the store host:port: " << msg;
    }
    if (std::string(c.phase) != "rendezvous") {
      const WorkerLine* later = run.find("LATER", r);
      ASSERT_NE(later, nullptr);
      EXPECT_EQ(later->field("status"), "PG_ERR_ABORTED");
      EXPECT_LT(later->number("took_ms"), 1000) << "a later call must fail fast";
      EXPECT_NE(later->msg.find("failed earlier"), std::string::npos) << later->msg;
    }
    const WorkerLine* exit = run.find("EXIT", r);
    ASSERT_NE(exit, nullptr) << "it crashed or was killed before finishing";
    EXPECT_EQ(exit->field("code"), "3");
  }
  // pgrun returns only once every rank is gone; none may linger (a stopped one included).
  for (const WorkerLine& w : run.lines) {
    if (w.kind == "PID") {
      EXPECT_TRUE(process_is_dead(static_cast<pid_t>(w.number("pid"))));
    }
  }
}

std::string name_of(const ::testing::TestParamInfo<Param>& info) {
  return std::get<0>(info.param) + "_" + std::get<1>(info.param).phase + "_victim" +
         std::to_string(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Faults, FaultMatrix,
                         ::testing::Combine(::testing::ValuesIn(process_backends()),
                                            ::testing::ValuesIn(kCases), ::testing::Values(1, 0)),
                         name_of);

// With pgrun's normal supervision (no --survive-sigterm) the job ends promptly: pgrun stops
// the survivors as soon as the victim dies, and reports the victim's signal.
TEST(FaultSupervision, PgrunStopsTheRestAndReportsTheFirstFailure) {
  for (const std::string& backend : process_backends()) {
    RunSpec spec;
    spec.backend = backend;
    spec.kill_grace_s = 2;
    spec.args = {"between", "--victim", "1"};
    FaultRun run = run_workers(spec);
    SCOPED_TRACE(backend + "\n" + run.log());
    EXPECT_EQ(run.pgrun.exit_code, 128 + 9) << "the victim's SIGKILL decides the exit code";
    EXPECT_LT(run.pgrun.seconds, spec.kill_grace_s + kTimeoutS);
    EXPECT_NE(run.pgrun.err.find("stopping the other ranks"), std::string::npos);
    for (const WorkerLine& w : run.lines) {
      if (w.kind == "PID") {
        EXPECT_TRUE(process_is_dead(static_cast<pid_t>(w.number("pid"))));
      }
    }
  }
}

}  // namespace
}  // namespace procgroup::testing
