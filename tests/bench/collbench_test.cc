// collbench under pgrun on the gloo backend: every collective, 2 and 3 ranks, every element
// checked for procgroup and for raw Gloo (--direct); the files it writes; the corruption hook
// that proves the check can fail; usage errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "bench_run.h"

namespace procgroup::testing {
namespace {

bool sized_per_rank(const std::string& op) {
  return op == "allgather" || op == "gather" || op == "reduce_scatter" || op == "scatter" ||
         op == "alltoall";
}

// The size column nccl-tests would print for a requested size (f32).
uint64_t expected_size(const std::string& op, uint64_t bytes, int ranks) {
  const uint64_t elements = bytes / 4;
  return (sized_per_rank(op) ? elements / ranks * ranks : elements) * 4;
}

double busbw_factor(const std::string& op, int n) {
  if (op == "allreduce") return 2.0 * (n - 1) / n;
  if (sized_per_rank(op)) return static_cast<double>(n - 1) / n;
  return 1.0;
}

void expect_consistent_bandwidth(const nlohmann::json& m, uint64_t size, double factor) {
  const double time = m["time_us"], algbw = m["algbw_gbps"], busbw = m["busbw_gbps"];
  EXPECT_GT(time, 0);
  EXPECT_NEAR(algbw, static_cast<double>(size) / time / 1e3, 1e-9 * algbw + 1e-12);
  EXPECT_NEAR(busbw, algbw * factor, 1e-9 * busbw + 1e-12);
}

std::vector<std::string> all_ops() {
  return {"allreduce", "allgather", "reduce_scatter", "broadcast", "reduce",
          "alltoall",  "gather",    "scatter",        "sendrecv"};
}

class CollbenchOp : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

// Sizes 12 B .. 384 KiB in steps of 8: odd element counts, one element per rank at the
// bottom, and both of allreduce's algorithms (bcube up to 256 KiB, ring above).
TEST_P(CollbenchOp, EveryElementIsRightThroughProcgroupAndRawGloo) {
  const auto& [op, ranks] = GetParam();
  BenchRun run =
      run_collbench(ranks, {op, "-b", "12", "-e", "512K", "-f", "8", "-n", "2", "-w", "1", "-c",
                            "1", "-r", std::to_string(ranks - 1), "--direct"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.out << run.result.err;
  ASSERT_TRUE(run.json.is_object()) << run.result.out;
  EXPECT_EQ(run.json["op"], op);
  EXPECT_EQ(run.json["backend"], "gloo");
  EXPECT_EQ(run.json["direct"], "gloo");
  EXPECT_EQ(run.json["world_size"], ranks);
  EXPECT_EQ(run.json["wrong_total"], 0);
  const std::vector<uint64_t> requested = {12, 96, 768, 6144, 49152, 393216};
  const auto& rows = run.json["rows"];
  ASSERT_EQ(rows.size(), requested.size()) << run.result.out;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    const uint64_t size = expected_size(op, requested[i], ranks);
    EXPECT_EQ(row["size_bytes"], size) << row;
    EXPECT_EQ(row["out_of_place"]["wrong"], 0) << row;
    EXPECT_EQ(row["direct"]["wrong"], 0) << row;
    EXPECT_EQ(row["in_place"].is_null(), op == "sendrecv") << row;
    if (!row["in_place"].is_null()) {
      EXPECT_EQ(row["in_place"]["wrong"], 0) << row;
    }
    expect_consistent_bandwidth(row["out_of_place"], size, busbw_factor(op, ranks));
  }
  const std::string header = "backend gloo, " + std::to_string(ranks) + " ranks";
  EXPECT_NE(run.result.out.find(header), std::string::npos) << run.result.out;
  EXPECT_NE(run.result.out.find("Wrong elements    : 0 (OK)"), std::string::npos);
  EXPECT_NE(run.result.out.find("Avg bus bandwidth"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(AllOps, CollbenchOp,
                         ::testing::Combine(::testing::ValuesIn(all_ops()),
                                            ::testing::Values(2, 3)),
                         [](const auto& param_info) {
                           return std::get<0>(param_info.param) + "_" +
                                  std::to_string(std::get<1>(param_info.param)) + "ranks";
                         });

// Every dtype and reduce op, 3 ranks. f16 is left out of reduce: Gloo's float16 assignment
// keeps the old bits when they, read as an integer, equal the new value, and the gloo
// backend reduces into uninitialised scratch on non-roots, so f16 reduce is sometimes wrong
// (docs/benchmarks.md, "Known problems").
class CollbenchAllTypes : public ::testing::TestWithParam<std::string> {};

TEST_P(CollbenchAllTypes, EveryDtypeAndReduceOpIsRight) {
  const std::string op = GetParam();
  const std::string dtypes = op == "reduce" ? "f32,f64,bf16,i8,u8,i32,i64" : "all";
  const size_t n_dtypes = op == "reduce" ? 7 : 8;
  BenchRun run = run_collbench(3, {op, "-b", "24", "-e", "48K", "-f", "16", "-n", "1", "-w", "0",
                                   "-d", dtypes, "-o", "all", "-r", "1", "--direct"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.out << run.result.err;
  ASSERT_TRUE(run.json.is_object()) << run.result.out;
  const size_t n_redops = op == "broadcast" ? 1 : 5;
  EXPECT_EQ(run.json["rows"].size(), n_dtypes * n_redops * 3) << run.result.out;
  EXPECT_EQ(run.json["wrong_total"], 0) << run.result.out;
  for (const auto& row : run.json["rows"]) EXPECT_EQ(wrong_in_row(row), 0) << row;
}

INSTANTIATE_TEST_SUITE_P(Ops, CollbenchAllTypes,
                         ::testing::Values("allreduce", "reduce_scatter", "reduce", "broadcast"),
                         [](const auto& param_info) { return std::string(param_info.param); });

TEST(Collbench, BlockingIssueIsRightToo) {
  for (const std::string op : {"allreduce", "sendrecv"}) {
    BenchRun run = run_collbench(2, {op, "-b", "8", "-e", "64K", "-f", "32", "-n", "3", "-z", "1"});
    EXPECT_EQ(run.result.exit_code, 0) << run.result.out << run.result.err;
    EXPECT_EQ(run.json["blocking"], true);
    EXPECT_EQ(run.json["wrong_total"], 0) << run.result.out;
  }
}

TEST(Collbench, CsvAndJsonCarryTheSameRowsAndColumns) {
  BenchRun run =
      run_collbench(2, {"allreduce", "-b", "8", "-e", "64K", "-f", "4", "-n", "2", "--direct"},
                    /*want_csv=*/true);
  ASSERT_EQ(run.result.exit_code, 0) << run.result.out << run.result.err;
  const std::vector<std::string> columns = {"tool",
                                            "backend",
                                            "world_size",
                                            "op",
                                            "size_bytes",
                                            "count",
                                            "dtype",
                                            "redop",
                                            "root",
                                            "oop_time_us",
                                            "oop_algbw_gbps",
                                            "oop_busbw_gbps",
                                            "oop_wrong",
                                            "ip_time_us",
                                            "ip_algbw_gbps",
                                            "ip_busbw_gbps",
                                            "ip_wrong",
                                            "direct_time_us",
                                            "direct_busbw_gbps",
                                            "direct_wrong",
                                            "ratio_busbw",
                                            "added_us",
                                            "memcpy_gbps",
                                            "reduce_f32_gbps"};
  const auto lines = parse_csv(run.csv);
  ASSERT_EQ(lines.size(), 1u + 7u) << run.csv;  // 8, 32, ..., 32K
  EXPECT_EQ(lines[0], columns);
  const auto& rows = run.json["rows"];
  ASSERT_EQ(rows.size(), 7u);
  uint64_t size = 8;
  for (size_t i = 0; i < rows.size(); ++i, size *= 4) {
    const auto& fields = lines[i + 1];
    ASSERT_EQ(fields.size(), columns.size()) << run.csv;
    EXPECT_EQ(fields[0], "collbench");
    EXPECT_EQ(fields[1], "gloo");
    EXPECT_EQ(fields[2], "2");
    EXPECT_EQ(fields[3], "allreduce");
    EXPECT_EQ(fields[4], std::to_string(size));
    EXPECT_EQ(fields[5], std::to_string(size / 4));
    EXPECT_EQ(fields[6], "f32");
    EXPECT_EQ(fields[7], "sum");
    EXPECT_EQ(fields[12], "0");
    EXPECT_EQ(fields[16], "0");
    EXPECT_EQ(fields[19], "0");
    EXPECT_EQ(rows[i]["size_bytes"], size);
    EXPECT_EQ(rows[i]["count"], size / 4);
    const double busbw = rows[i]["out_of_place"]["busbw_gbps"];
    EXPECT_NEAR(std::stod(fields[11]), busbw, 1e-6);
    const double ratio = rows[i]["ratio_busbw"];
    EXPECT_NEAR(std::stod(fields[20]), ratio, 1e-4);
    const double added = rows[i]["added_us"];
    EXPECT_NEAR(added,
                rows[i]["out_of_place"]["time_us"].get<double>() -
                    rows[i]["direct"]["time_us"].get<double>(),
                1e-9);
    EXPECT_NEAR(std::stod(fields[21]), added, 1e-3);
    for (const char* key : {"time_us", "algbw_gbps", "busbw_gbps", "wrong"}) {
      EXPECT_TRUE(rows[i]["out_of_place"].contains(key)) << key;
      EXPECT_TRUE(rows[i]["in_place"].contains(key)) << key;
    }
  }
}

// The check must be able to fail: rank 1 overwrites its input element 0 before each checked
// run, after the expected values were computed. Allreduce carries it to element 0 of both
// ranks' outputs: 2 wrong per checked run (out-of-place, in-place, raw Gloo) per size.
TEST(Collbench, CorruptedInputIsCountedAndFailsTheRun) {
  BenchRun run = run_collbench(2, {"allreduce", "-b", "64", "-e", "1K", "-f", "4", "-n", "1",
                                   "--direct", "--corrupt-rank", "1"});
  EXPECT_NE(run.result.exit_code, 0) << run.result.out;
  ASSERT_TRUE(run.json.is_object()) << run.result.out << run.result.err;
  const auto& rows = run.json["rows"];
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& row : rows) {
    EXPECT_EQ(row["out_of_place"]["wrong"], 2) << row;
    EXPECT_EQ(row["in_place"]["wrong"], 2) << row;
    EXPECT_EQ(row["direct"]["wrong"], 2) << row;
  }
  EXPECT_EQ(run.json["wrong_total"], 3 * 3 * 2);
  EXPECT_NE(run.result.out.find("Wrong elements    : 18 (FAILED)"), std::string::npos)
      << run.result.out;
}

TEST(Collbench, UsageErrorsExitWithTwoAndSayWhy) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"allreduce", "-b", "8Q"}, "unit not recognized"},
      {{"-b", "8"}, "A subcommand is required"},
      {{"allreduce", "-d", "f128"}, "--datatype"},
      {{"allreduce", "-b", "1M", "-e", "1K"}, "-e/--maxbytes is below -b/--minbytes"},
      {{"allreduce", "-f", "1"}, "--stepfactor"}};
  for (const Case& c : cases) {
    std::vector<std::string> argv{COLLBENCH_PATH};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    ProcessResult r = run(argv, 30);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
  }
}

TEST(Collbench, RootOutsideTheGroupIsAnError) {
  BenchRun run = run_collbench(2, {"broadcast", "-b", "8", "-e", "8", "-r", "2"});
  EXPECT_EQ(run.result.exit_code, 1);
  EXPECT_NE(run.result.err.find("-r/--root 2 is not a rank (2 ranks)"), std::string::npos)
      << run.result.err;
}

// nccl-tests' per-rank lines: every rank's pid, host and device, gathered on rank 0.
TEST(Collbench, EveryRankSaysWhereItRuns) {
  BenchRun run = run_collbench(2, {"allreduce", "-b", "8", "-e", "8", "-n", "1", "-w", "0"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.out << run.result.err;
  ASSERT_EQ(run.json["ranks"].size(), 2u) << run.json;
  for (int r = 0; r < 2; ++r) {
    const auto& place = run.json["ranks"][r];
    EXPECT_EQ(place["rank"], r);
    EXPECT_EQ(place["host"], run.json["host"]);
    EXPECT_EQ(place["device"], "cpu");
    const std::string line = "#  Rank  " + std::to_string(r) + " Group  0 Pid ";
    EXPECT_NE(run.result.out.find(line), std::string::npos) << run.result.out;
    EXPECT_NE(run.result.out.find(std::to_string(place["pid"].get<int>()) + " on "),
              std::string::npos)
        << run.result.out;
  }
  EXPECT_NE(run.json["ranks"][0]["pid"], run.json["ranks"][1]["pid"]);
}

}  // namespace
}  // namespace procgroup::testing
