// How pgrun copies the ranks' stdout and stderr: whole prefixed lines, never torn between ranks.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "subprocess.h"

namespace procgroup::testing {
namespace {

TEST(PgrunOutput, PrefixesEveryLineAndNeverInterleavesRanksMidLine) {
  constexpr int kRanks = 4;
  constexpr int kLines = 500;
  // The probe writes each line in three write() calls; unbuffered copying would tear them.
  const ProcessResult r =
      run({PGRUN_PATH, "--nproc-per-node", std::to_string(kRanks), PGRUN_PROBE_PATH, "lines",
           std::to_string(kLines), "err", "to-stderr"},
          45);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  const std::regex line_re(R"(^\[rank (\d)\] rank=(\d) line=(\d+) ([a-z]+) end$)");
  std::map<int, int> next_line;
  std::istringstream lines(r.out);
  std::string line;
  int total = 0;
  while (std::getline(lines, line)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, line_re)) << "torn or unprefixed line: " << line;
    const int rank = std::stoi(m[1]);
    ASSERT_EQ(std::stoi(m[2]), rank) << line;
    ASSERT_EQ(std::stoi(m[3]), next_line[rank]) << "lines of rank " << rank << " out of order";
    ASSERT_EQ(m[4].str(), std::string(150, static_cast<char>('a' + rank))) << line;
    ++next_line[rank];
    ++total;
  }
  EXPECT_EQ(total, kRanks * kLines);
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_EQ(next_line[rank], kLines) << "rank " << rank;
    // stderr lines go to pgrun's stderr, prefixed the same way.
    EXPECT_NE(r.err.find("[rank " + std::to_string(rank) + "] to-stderr\n"), std::string::npos)
        << r.err;
  }
  EXPECT_EQ(r.out.find("to-stderr"), std::string::npos);
}

TEST(PgrunOutput, EndsAPartialLastLineWithANewline) {
  const ProcessResult r = run({PGRUN_PATH, "--tee-prefix", "--nproc-per-node", "2",
                               PGRUN_PROBE_PATH, "out", "first", "partial", "no-newline"},
                              30);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* rank : {"0", "1"}) {
    const std::string prefix = std::string("[rank ") + rank + "] ";
    EXPECT_NE(r.out.find(prefix + "first\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(prefix + "no-newline\n"), std::string::npos) << r.out;
  }
  EXPECT_EQ(r.out.size(), 2 * (std::string("[rank 0] first\n").size() +
                               std::string("[rank 0] no-newline\n").size()))
      << r.out;
}

TEST(PgrunOutput, NoPrefixPassesOutputThroughUntouched) {
  const ProcessResult r = run({PGRUN_PATH, "--no-prefix", "--nproc-per-node", "1", PGRUN_PROBE_PATH,
                               "out", "hello", "err", "oops", "partial", "tail"},
                              30);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello\ntail");
  EXPECT_EQ(r.err, "oops\n");
}

TEST(PgrunOutput, ArgumentsAfterProgramBelongToIt) {
  // "--help" and "--nproc-per-node" after PROGRAM are the probe's text, not pgrun options.
  const ProcessResult r = run({PGRUN_PATH, "--nproc-per-node", "1", "--", PGRUN_PROBE_PATH, "out",
                               "--help", "out", "--nproc-per-node"},
                              30);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[rank 0] --help\n[rank 0] --nproc-per-node\n");
  const ProcessResult plain =
      run({PGRUN_PATH, "--nproc-per-node", "1", PGRUN_PROBE_PATH, "out", "--help"}, 30);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out, "[rank 0] --help\n");
}

}  // namespace
}  // namespace procgroup::testing
