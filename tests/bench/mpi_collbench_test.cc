// mpi_collbench under mpirun: every collective checked element by element (every dtype and
// reduce op for the reducing ones), blocking (-z 1) and through the nonblocking functions
// (-z 0), the corruption hook, --reference, and the shared output format.
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

// -z 0: MPI_Iallreduce and friends, every iteration issued, then MPI_Waitall; the checked
// run goes through the same nonblocking call.
class MpiCollbenchPipelined : public NeedsMpi<::testing::TestWithParam<std::string>> {};

TEST_P(MpiCollbenchPipelined, EveryElementIsRight) {
  const std::string& op = GetParam();
  const bool reducing = op == "allreduce" || op == "reduce" || op == "reduce_scatter";
  BenchRun run = run_mpi_collbench(
      2, {op, "-b", "8", "-e", "64K", "-f", "8", "-n", "4", "-w", "1", "-z", "0", "-d",
          "f32,bf16,i64", "-o", reducing ? "sum,avg,max" : "sum", "-r", "1"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.out << run.result.err;
  ASSERT_TRUE(run.json.is_object()) << run.result.out;
  EXPECT_EQ(run.json["blocking"], false);
  EXPECT_NE(run.result.out.find("all iterations issued, then waited for (-z 0)"), std::string::npos)
      << run.result.out;
  EXPECT_FALSE(run.json["rows"].empty()) << run.result.out;
  EXPECT_EQ(run.json["wrong_total"], 0) << run.result.out;
  for (const auto& row : run.json["rows"]) EXPECT_EQ(wrong_in_row(row), 0) << row;
}

INSTANTIATE_TEST_SUITE_P(AllOps, MpiCollbenchPipelined,
                         ::testing::Values("allreduce", "allgather", "reduce_scatter", "broadcast",
                                           "reduce", "alltoall", "gather", "scatter", "sendrecv"),
                         [](const auto& param_info) { return param_info.param; });

// --reference: memcpy and reduce-into bandwidth beside every row, in the table and the files.
TEST_F(MpiCollbench, ReferenceColumns) {
  BenchRun run = run_mpi_collbench(
      2, {"allreduce", "-b", "8", "-e", "64K", "-f", "64", "-n", "2", "-w", "1", "--reference"},
      /*want_csv=*/true);
  ASSERT_EQ(run.result.exit_code, 0) << run.result.out << run.result.err;
  EXPECT_NE(run.result.out.find("# reference: this machine's memory"), std::string::npos)
      << run.result.out;
  EXPECT_EQ(run.json["reference"], true);
  ASSERT_EQ(run.json["rows"].size(), 3u) << run.result.out;
  for (const auto& row : run.json["rows"]) {
    EXPECT_GT(row["reference"]["memcpy_gbps"].get<double>(), 0.0) << row;
    EXPECT_GT(row["reference"]["reduce_f32_gbps"].get<double>(), 0.0) << row;
  }
  const auto lines = parse_csv(run.csv);
  ASSERT_EQ(lines.size(), 4u) << run.csv;
  ASSERT_EQ(lines[0].size(), 24u);
  EXPECT_EQ(lines[0][22], "memcpy_gbps");
  EXPECT_EQ(lines[0][23], "reduce_f32_gbps");
  EXPECT_FALSE(lines[1][22].empty()) << run.csv;
}

TEST_F(MpiCollbench, CorruptedInputIsCountedAndFailsTheRun) {
  BenchRun run = run_mpi_collbench(
      2, {"allreduce", "-b", "64", "-e", "1K", "-f", "4", "-n", "1", "--corrupt-rank", "0"},
      /*want_csv=*/true);
  EXPECT_NE(run.result.exit_code, 0) << run.result.out;
  ASSERT_TRUE(run.json.is_object()) << run.result.out << run.result.err;
  EXPECT_EQ(run.json["wrong_total"], 3 * 2 * 2);
  const auto lines = parse_csv(run.csv);
  ASSERT_EQ(lines.size(), 4u) << run.csv;
  EXPECT_EQ(lines[0].size(), 24u);
  EXPECT_EQ(lines[1][0], "mpi_collbench");
  EXPECT_EQ(lines[1][12], "2");  // oop_wrong
  EXPECT_EQ(lines[1][17], "");   // no direct columns for MPI
  EXPECT_EQ(lines[1][22], "");   // nor reference ones without --reference
}

}  // namespace
}  // namespace procgroup::testing
