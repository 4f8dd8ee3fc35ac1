// pgrun --bind-to: each rank's CPU affinity as the rank itself reads it.
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "subprocess.h"

namespace procgroup::testing {
namespace {

// "[rank R] cpus=LIST" lines of the probe's "cpus" action, by rank.
std::map<int, std::string> parse_cpus(const std::string& out) {
  std::map<int, std::string> cpus;
  const std::regex line_re(R"(^\[rank (\d+)\] cpus=(.*)$)");
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_match(line, m, line_re)) cpus[std::stoi(m[1])] = m[2];
  }
  return cpus;
}

// "0-3,8" as a set of CPU numbers.
std::set<int> parse_list(const std::string& list) {
  std::set<int> cpus;
  std::istringstream parts(list);
  std::string part;
  while (std::getline(parts, part, ',')) {
    const size_t dash = part.find('-');
    const int first = std::stoi(part.substr(0, dash));
    const int last = dash == std::string::npos ? first : std::stoi(part.substr(dash + 1));
    for (int cpu = first; cpu <= last; ++cpu) cpus.insert(cpu);
  }
  return cpus;
}

std::vector<int> my_cpus() {
  cpu_set_t mine;
  EXPECT_EQ(::sched_getaffinity(0, sizeof(mine), &mine), 0);
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &mine)) cpus.push_back(cpu);
  return cpus;
}

TEST(PgrunBind, ByDefaultRanksKeepPgrunsCpus) {
  const ProcessResult r = run({PGRUN_PATH, "--nproc-per-node", "2", PGRUN_PROBE_PATH, "cpus"}, 30);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto cpus = parse_cpus(r.out);
  ASSERT_EQ(cpus.size(), 2u) << r.out;
  const std::vector<int> mine = my_cpus();
  for (const auto& [rank, list] : cpus) {
    const std::set<int> got = parse_list(list);
    EXPECT_EQ(std::vector<int>(got.begin(), got.end()), mine) << "rank " << rank << ": " << list;
  }
  EXPECT_EQ(r.err.find("--bind-to"), std::string::npos) << r.err;
}

TEST(PgrunBind, CoreGivesEachRankItsOwnShareAndSaysSo) {
  const ProcessResult r =
      run({PGRUN_PATH, "--bind-to", "core", "--nproc-per-node", "2", "--node-rank", "1", "--nnodes",
           "2", "--master-port", "29999", PGRUN_PROBE_PATH, "cpus"},
          30);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto cpus = parse_cpus(r.out);
  ASSERT_EQ(cpus.size(), 2u) << r.out;
  const std::vector<int> mine = my_cpus();
  std::set<int> taken;
  for (int rank = 2; rank < 4; ++rank) {
    const std::set<int> got = parse_list(cpus.at(rank));
    ASSERT_FALSE(got.empty()) << cpus.at(rank);
    for (int cpu : got) {
      EXPECT_NE(std::find(mine.begin(), mine.end(), cpu), mine.end())
          << "rank " << rank << " got CPU " << cpu << ", which pgrun may not use";
      // With at least as many CPUs as ranks, no two ranks share one.
      if (mine.size() >= 2) {
        EXPECT_TRUE(taken.insert(cpu).second) << "CPU " << cpu << " twice";
      }
    }
    // What pgrun says is what the rank got.
    const std::string said = "rank " + std::to_string(rank) +
                             (got.size() > 1 ? " on CPUs " : " on CPU ") + cpus.at(rank);
    EXPECT_NE(r.err.find(said), std::string::npos) << said << " in: " << r.err;
  }
  EXPECT_NE(r.err.find("pgrun: note: --bind-to core: "), std::string::npos) << r.err;
}

TEST(PgrunBind, UnknownModeIsAUsageError) {
  const ProcessResult r =
      run({PGRUN_PATH, "--bind-to", "socket", "--nproc-per-node", "2", PGRUN_PROBE_PATH}, 30);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--bind-to: socket not in {none,core}"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace procgroup::testing
