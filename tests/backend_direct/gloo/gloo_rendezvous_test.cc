// The gloo plugin's rendezvous at sizes nobody fills: a rank given a huge world size gives
// up within 1.5 timeouts without allocating anything per absent peer, and the ranks that
// did not join are named as ranges.
#include <gtest/gtest.h>

#include <chrono>
#include <climits>
#include <fstream>
#include <string>

#include "../../support/peak_rss.h"
#include "gloo_test_support.h"

namespace procgroup::gloo_test {
namespace {

using Clock = std::chrono::steady_clock;

int64_t ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

using pgtest::peak_rss_kib;

TEST(GlooRendezvous, AHugeWorldSizeAloneEndsWithinTheTimeoutInLittleMemory) {
  WorldOptions opts;
  opts.create_group = false;
  opts.limit_s = 15;  // before the fix: a pair per rank, gigabytes, never returns
  run_world(1, opts, [](RankEnv& r) {
    const int64_t rss_before = peak_rss_kib();
    const auto start = Clock::now();
    pg_backend_group_t g = nullptr;
    const pg_status_t st = create_group(*r.ops, *r.store, 0, INT_MAX, 1000, &g);
    const std::string err = take_error();
    const int64_t took = ms_since(start);
    r.expect_status(st, PG_ERR_TIMEOUT, "group_create of 2^31-1 ranks alone: " + err);
    r.expect(err.find("ranks 1-2147483646 did not join") != std::string::npos, "message: " + err);
    r.expect(took < 1500, "gave up after " + std::to_string(took) + " ms (timeout 1000 ms)");
    const int64_t grew = peak_rss_kib() - rss_before;
    r.expect(grew < 32 * 1024, "peak RSS grew by " + std::to_string(grew) + " KiB");
  });
}

TEST(GlooRendezvous, MissingRanksAreNamedAsRanges) {
  WorldOptions opts;
  opts.create_group = false;
  run_world(6, opts, [](RankEnv& r) {
    if (r.rank != 0 && r.rank != 2) return;  // ranks 1, 3, 4 and 5 never show up
    const auto start = Clock::now();
    pg_backend_group_t g = nullptr;
    const pg_status_t st = create_group(*r.ops, *r.store, r.rank, 6, 1000, &g);
    const std::string err = take_error();
    const int64_t took = ms_since(start);
    r.expect_status(st, PG_ERR_TIMEOUT, "group_create with 2 of 6 ranks: " + err);
    r.expect(
        err.find("ranks 1, 3-5 did not join the rendezvous within 1000 ms") != std::string::npos,
        "message: " + err);
    r.expect(err.find("2 of 6 joined") != std::string::npos, "message: " + err);
    r.expect(took < 1500, "gave up after " + std::to_string(took) + " ms (timeout 1000 ms)");
  });
}

}  // namespace
}  // namespace procgroup::gloo_test
