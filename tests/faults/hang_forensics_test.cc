// Hang forensics across processes (docs/errors.md): a rank SIGSTOPped before a collective.
// Each survivor, at its timeout, logs its last operations and writes
// PROCGROUP_TRACE_DIR/procgroup-world-rank<R>.trace; the lowest reporting rank prints one
// summary naming who is behind; the stopped rank writes nothing. When the stopped rank is
// rank 0, which hosts the store, no summary can be gathered: the trace files still appear.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <tuple>

#include "fault_run.h"

namespace procgroup::testing {
namespace {

constexpr int kTimeoutS = 4;
constexpr int kRanks = 3;

using Param = std::tuple<std::string, int>;  // backend, stopped rank
class HangForensics : public ::testing::TestWithParam<Param> {};

TEST_P(HangForensics, TraceFilesAndOneSummaryNameWhoIsBehind) {
  const auto& [backend, stopped] = GetParam();
  TempDir traces;
  RunSpec spec;
  spec.backend = backend;
  spec.nproc = kRanks;
  spec.timeout_s = kTimeoutS;
  spec.kill_grace_s = 2 * kTimeoutS + 4;
  spec.args = {"stop", "--victim", std::to_string(stopped), "--survive-sigterm"};
  spec.env = {"PROCGROUP_TRACE_DIR=" + traces.str()};
  FaultRun run = run_workers(spec);
  const std::string log = run.log();
  SCOPED_TRACE(log);
  for (int r = 0; r < kRanks; ++r) {
    const auto file = std::filesystem::path(traces.path()) /
                      ("procgroup-world-rank" + std::to_string(r) + ".trace");
    if (r == stopped) {
      EXPECT_FALSE(std::filesystem::exists(file)) << "a stopped rank writes nothing";
      continue;
    }
    ASSERT_TRUE(std::filesystem::exists(file)) << file;
    const std::string trace = read_file(file);
    EXPECT_NE(trace.find("allreduce #1 (f32 x 1, sum) started"), std::string::npos) << trace;
    EXPECT_NE(trace.find("allreduce #2 (f32 x 1, sum)"), std::string::npos) << trace;
    EXPECT_NE(trace.find("running"), std::string::npos) << trace;
  }
  if (stopped == 0) {
    EXPECT_EQ(count(log, "hang summary"), 0) << "no store, no summary";
    return;
  }
  // Exactly one summary, from rank 0, naming the stopped rank.
  const std::string summary =
      "group 'world' hang summary: ranks 0, 2 are in allreduce #2 (f32 x "
      "1, sum); rank 1 did not report";
  EXPECT_EQ(count(log, "hang summary"), 1);
  EXPECT_NE(log.find(summary), std::string::npos);
  const size_t at = log.find("hang summary");
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(log.rfind("[rank 0]", at), log.rfind("[rank ", at)) << "rank 0 prints it";
}

std::string name_of(const ::testing::TestParamInfo<Param>& info) {
  return std::get<0>(info.param) + "_stopped" + std::to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Backends, HangForensics,
                         ::testing::Combine(::testing::ValuesIn(process_backends()),
                                            ::testing::Values(1, 0)),
                         name_of);

}  // namespace
}  // namespace procgroup::testing
