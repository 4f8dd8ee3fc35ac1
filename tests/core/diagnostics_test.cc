// Debugging aids of the core, through the public API with thread ranks: fingerprint checks
// under PROCGROUP_DEBUG=detail, and the hang report (flight record, trace files, summary).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "thread_group.h"

namespace pgtest {
namespace {

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class DebugDetail : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { setenv("PROCGROUP_DEBUG", "detail", 1); }
  void TearDown() override { unsetenv("PROCGROUP_DEBUG"); }
};

TEST_P(DebugDetail, DifferentCollectivesFailOnEveryRankNamingBoth) {
  run_thread_ranks(GetParam(), 2, [](pg_group_t g, int rank) {
    float x[4] = {1, 2, 3, 4};
    pg_buffer_t b = pg_buffer_cpu(x, 4, PG_DTYPE_F32);
    pg_status_t s = rank == 0 ? pg_allreduce(g, nullptr, &b, nullptr, nullptr)
                              : pg_broadcast(g, nullptr, &b, nullptr, nullptr);
    EXPECT_EQ(s, PG_ERR_MISMATCH) << pg_status_name(s) << ": " << pg_last_error();
    EXPECT_STREQ(pg_last_error(),
                 "rank 1 called broadcast(f32, 4, root=0) as op #1 while rank 0 called "
                 "allreduce(f32, 4, sum)");
  });
}

TEST_P(DebugDetail, DifferentCountsAreCaught) {
  run_thread_ranks(GetParam(), 3, [](pg_group_t g, int rank) {
    int32_t x[5] = {};
    pg_buffer_t b = pg_buffer_cpu(x, rank == 2 ? 5 : 4, PG_DTYPE_I32);
    pg_status_t s = pg_allreduce(g, nullptr, &b, nullptr, nullptr);
    EXPECT_EQ(s, PG_ERR_MISMATCH) << pg_last_error();
    EXPECT_NE(std::string(pg_last_error()).find("rank 2 called allreduce(i32, 5, sum)"),
              std::string::npos)
        << pg_last_error();
  });
}

TEST_P(DebugDetail, DriftedSequenceIsNamed) {
  run_thread_ranks(GetParam(), 2, [](pg_group_t g, int rank) {
    // An extra collective on rank 0 only: the first check pairs it with rank 1's allreduce.
    if (rank == 0) {
      EXPECT_EQ(pg_barrier(g, nullptr, nullptr), PG_ERR_MISMATCH);
      return;  // still out of step: anything more would wait for a partner that never comes
    }
    double x = 1;
    pg_buffer_t b = pg_buffer_cpu(&x, 1, PG_DTYPE_F64);
    pg_status_t s = pg_allreduce(g, nullptr, &b, nullptr, nullptr);
    if (rank == 1) {
      EXPECT_EQ(s, PG_ERR_MISMATCH) << pg_last_error();
      EXPECT_STREQ(pg_last_error(),
                   "rank 1 called allreduce(f64, 1, sum) as op #1 while rank 0 called barrier()");
    }
  });
}

TEST_P(DebugDetail, MatchingCollectivesStillComputeCorrectly) {
  run_thread_ranks(GetParam(), 3, [](pg_group_t g, int rank) {
    for (int i = 0; i < 5; ++i) {
      int64_t x[3] = {rank, rank, rank};
      pg_buffer_t b = pg_buffer_cpu(x, 3, PG_DTYPE_I64);
      ASSERT_EQ(pg_allreduce(g, nullptr, &b, nullptr, nullptr), PG_OK) << pg_last_error();
      EXPECT_EQ(x[2], 0 + 1 + 2);
      ASSERT_EQ(pg_barrier(g, nullptr, nullptr), PG_OK) << pg_last_error();
    }
  });
}

TEST(DebugSetting, UnknownValueIsAConfigError) {
  setenv("PROCGROUP_DEBUG", "verbose", 1);
  pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
  o.size = 1;
  o.backend = "loopback";
  pg_group_t g = nullptr;
  EXPECT_EQ(pg_group_create(&o, &g), PG_ERR_CONFIG);
  EXPECT_NE(std::string(pg_last_error()).find("PROCGROUP_DEBUG='verbose'"), std::string::npos);
  unsetenv("PROCGROUP_DEBUG");
}

TEST(HangReport, TimedOutRanksDumpTheirRecordAndOneSummaryNamesWhoIsBehind) {
  TempDir traces;
  setenv("PROCGROUP_TRACE_DIR", traces.path().c_str(), 1);
  // A link planted at rank 0's report name: the report replaces the link, never its target.
  const auto victim = std::filesystem::path(traces.path()) / "victim";
  std::ofstream(victim) << "precious";
  std::filesystem::create_symlink(
      victim, std::filesystem::path(traces.path()) / "procgroup-world-rank0.trace");
  RankOptions options;
  options.timeout_ms = 1000;
  ::testing::internal::CaptureStderr();
  run_thread_ranks(
      "loopback", 3,
      [](pg_group_t g, int rank) {
        float x = 1;
        pg_buffer_t b = pg_buffer_cpu(&x, 1, PG_DTYPE_F32);
        ASSERT_EQ(pg_allreduce(g, nullptr, &b, nullptr, nullptr), PG_OK) << pg_last_error();
        if (rank == 2) {  // busy elsewhere: never joins the second allreduce
          std::this_thread::sleep_for(std::chrono::milliseconds(3500));
          return;
        }
        EXPECT_EQ(pg_allreduce(g, nullptr, &b, nullptr, nullptr), PG_ERR_TIMEOUT)
            << pg_last_error();
      },
      options);
  std::string log = ::testing::internal::GetCapturedStderr();
  unsetenv("PROCGROUP_TRACE_DIR");
  for (int rank : {0, 1}) {
    auto file = std::filesystem::path(traces.path()) /
                ("procgroup-world-rank" + std::to_string(rank) + ".trace");
    ASSERT_TRUE(std::filesystem::exists(file)) << file;
    EXPECT_FALSE(std::filesystem::is_symlink(file)) << file;
    std::string trace = slurp(file);
    EXPECT_NE(trace.find("allreduce #1 (f32 x 1, sum) started"), std::string::npos) << trace;
    EXPECT_NE(trace.find("PG_OK after"), std::string::npos) << trace;
    EXPECT_NE(trace.find("allreduce #2 (f32 x 1, sum)"), std::string::npos) << trace;
  }
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(traces.path()) /
                                       "procgroup-world-rank2.trace"));
  EXPECT_EQ(slurp(victim), "precious");
  // Exactly one summary, from the lowest reporting rank.
  const std::string summary =
      "group 'world' hang summary: ranks 0-1 are in allreduce #2 (f32 x 1, sum); rank 2 did "
      "not report (busy outside procgroup, stuck or gone; not joined op #2)";
  EXPECT_NE(log.find(summary), std::string::npos) << log;
  EXPECT_EQ(log.find(summary), log.rfind(summary)) << log;
}

INSTANTIATE_TEST_SUITE_P(Loopback, DebugDetail, ::testing::Values("loopback", "loopback_p2p"));

}  // namespace
}  // namespace pgtest
