// mpi_collbench under mpirun: every collective checked element by element (every dtype and
// reduce op for the reducing ones), the corruption hook, and the shared output format.
// Skips, saying why, when MPI was not built or mpirun is not installed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <tuple>
#include <vector>

#include "bench_run.h"

namespace procgroup::testing {
namespace {

bool mpi_available(std::string* why) {
  if (std::string(MPI_COLLBENCH_PATH).empty()) {
    *why = "mpi_collbench was not built (MPI not found: install libopenmpi-dev)";
    return false;
  }
  if (std::string(MPIRUN_PATH).empty() || access(MPIRUN_PATH, X_OK) != 0) {
    *why = "mpirun is not installed (openmpi-bin)";
    return false;
  }
  return true;
}

// Skips every test of the fixture when MPI cannot run here.
template <typename Base>
class NeedsMpi : public Base {
 protected:
  void SetUp() override {
    std::string why;
    if (!mpi_available(&why)) GTEST_SKIP() << why;
  }
};

using MpiCollbench = NeedsMpi<::testing::Test>;
using MpiCollbenchOp = NeedsMpi<::testing::TestWithParam<std::tuple<std::string, int>>>;

TEST_P(MpiCollbenchOp, EveryElementIsRight) {
  const auto& [op, ranks] = GetParam();
  const bool reducing = op == "allreduce" || op == "reduce" || op == "reduce_scatter";
  BenchRun run = run_mpi_collbench(
      ranks, {op, "-b", "24", "-e", "48K", "-f", "16", "-n", "1", "-w", "0", "-d", "all", "-o",
              reducing ? "all" : "sum", "-r", std::to_string(ranks - 1)});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.out << run.result.err;
  ASSERT_TRUE(run.json.is_object()) << run.result.out;
  EXPECT_EQ(run.json["tool"], "mpi_collbench");
  EXPECT_EQ(run.json["backend"], "mpi");
  EXPECT_EQ(run.json["world_size"], ranks);
  EXPECT_EQ(run.json["rows"].size(), 8u * (reducing ? 5 : 1) * 3) << run.result.out;
  EXPECT_EQ(run.json["wrong_total"], 0) << run.result.out;
  for (const auto& row : run.json["rows"]) EXPECT_EQ(wrong_in_row(row), 0) << row;
}

INSTANTIATE_TEST_SUITE_P(
    AllOps, MpiCollbenchOp,
    ::testing::Combine(::testing::Values("allreduce", "allgather", "reduce_scatter", "broadcast",
                                         "reduce", "alltoall", "gather", "scatter", "sendrecv"),
                       ::testing::Values(2, 3)),
    [](const auto& param_info) {
      return std::get<0>(param_info.param) + "_" + std::to_string(std::get<1>(param_info.param)) +
             "ranks";
    });

TEST_F(MpiCollbench, CorruptedInputIsCountedAndFailsTheRun) {
  BenchRun run = run_mpi_collbench(
      2, {"allreduce", "-b", "64", "-e", "1K", "-f", "4", "-n", "1", "--corrupt-rank", "0"},
      /*want_csv=*/true);
  EXPECT_NE(run.result.exit_code, 0) << run.result.out;
  ASSERT_TRUE(run.json.is_object()) << run.result.out << run.result.err;
  EXPECT_EQ(run.json["wrong_total"], 3 * 2 * 2);
  const auto lines = parse_csv(run.csv);
  ASSERT_EQ(lines.size(), 4u) << run.csv;
  EXPECT_EQ(lines[0].size(), 22u);
  EXPECT_EQ(lines[1][0], "mpi_collbench");
  EXPECT_EQ(lines[1][12], "2");  // oop_wrong
  EXPECT_EQ(lines[1][17], "");   // no direct columns for MPI
}

}  // namespace
}  // namespace procgroup::testing
