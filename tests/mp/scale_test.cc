// 64 ranks as real processes on this machine, through pgrun, on gloo and on ucx: the
// allreduce is right on every rank, the rendezvous ends in bounded time, and a rank's
// memory stays flat from 8 ranks to 64 (nothing per rank beyond its own peers' due).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "subprocess.h"

namespace procgroup::testing {
namespace {

struct RankReport {
  double create_ms = 0;
  long rss_kb = 0;
};

struct ScaleRun {
  std::vector<RankReport> ranks;  // those that printed their report with a right allreduce
  double seconds = 0;
  std::string output;
  double max_create_ms() const {
    double m = 0;
    for (const auto& r : ranks) m = std::max(m, r.create_ms);
    return m;
  }
  long median_rss_kb() const {
    std::vector<long> rss;
    for (const auto& r : ranks) rss.push_back(r.rss_kb);
    std::sort(rss.begin(), rss.end());
    return rss.empty() ? 0 : rss[rss.size() / 2];
  }
};

ScaleRun run_scale(const std::string& backend, int size) {
  ProcessResult r =
      run({PGRUN_PATH, "--nproc-per-node", std::to_string(size), MP_WORKER_PATH, "scale"}, 120,
          {"PROCGROUP_BACKEND=" + backend, "PROCGROUP_TIMEOUT=60"});
  ScaleRun out;
  out.seconds = r.seconds;
  out.output = r.out + r.err;
  EXPECT_EQ(r.exit_code, 0) << backend << " x" << size << ":\n" << out.output.substr(0, 4000);
  static const std::regex line(R"(scale: create_ms=(\d+) rss_kb=(\d+) allreduce=ok)");
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), line);
       it != std::sregex_iterator(); ++it) {
    out.ranks.push_back({std::stod((*it)[1]), std::stol((*it)[2])});
  }
  EXPECT_EQ(static_cast<int>(out.ranks.size()), size)
      << backend << " x" << size << ": ranks with a right allreduce\n"
      << out.output.substr(0, 4000);
  std::printf("%s x%d: %.1f s in all, rendezvous up to %.0f ms, median peak RSS %ld KiB\n",
              backend.c_str(), size, out.seconds, out.max_create_ms(), out.median_rss_kb());
  return out;
}

void expect_scales(const std::string& backend) {
  const ScaleRun small = run_scale(backend, 8);
  const ScaleRun large = run_scale(backend, 64);
  if (small.ranks.empty() || large.ranks.empty()) return;
  // 64 processes share 2 cores here: the bound is generous, the hang it catches is not.
  EXPECT_LT(large.max_create_ms(), 30000) << "the slowest rank's group creation";
  // Per-peer state is small (a Gloo pair, a UCX endpoint): 8x the peers may not cost a
  // rank more than a quarter of its memory again.
  EXPECT_LT(large.median_rss_kb(), small.median_rss_kb() * 5 / 4 + 2048)
      << "median peak RSS per rank: " << small.median_rss_kb() << " KiB at 8 ranks, "
      << large.median_rss_kb() << " KiB at 64";
}

TEST(Scale, SixtyFourRanksOnGloo) { expect_scales("gloo"); }

TEST(Scale, SixtyFourRanksOnUcx) {
#ifndef PROCGROUP_TEST_HAVE_UCX
  GTEST_SKIP() << "the ucx plugin is not built here";
#endif
  expect_scales("ucx");
}

}  // namespace
}  // namespace procgroup::testing
