// The ucx plugin's group creation at sizes nobody fills: a rank given the largest size ucx
// takes returns within the timeout without allocating per absent peer.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>

#include "ucx_test_support.h"

namespace procgroup::ucx_test {
namespace {

using Clock = std::chrono::steady_clock;

// This process's peak resident set, in KiB (VmHWM).
int64_t peak_rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

TEST(UcxRendezvous, TheLargestSizeAloneCostsLittleMemoryAndTime) {
  WorldOptions options;
  options.create_group = false;
  run_world(1, options, [](RankEnv& env) {
    const int64_t rss_before = peak_rss_kib();
    const auto start = Clock::now();
    pg_backend_group_t group = nullptr;
    const pg_status_t st = create_group(*env.ops, *env.store, 0, 1 << 22, 1000, &group);
    const std::string error = take_error();
    const auto took =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    // Above PROCGROUP_UCX_CONNECT_ALL_MAX ranks connect lazily: creation does not wait.
    env.expect_status(st, PG_OK, "group_create of 2^22 ranks alone: " + error);
    env.expect(took < 1500, "took " + std::to_string(took) + " ms (timeout 1000 ms)");
    const int64_t grew = peak_rss_kib() - rss_before;
    env.expect(grew < 64 * 1024, "peak RSS grew by " + std::to_string(grew) + " KiB");
    if (group != nullptr) env.expect_status(env.ops->group_destroy(group), PG_OK, "destroy");
  });
}

}  // namespace
}  // namespace procgroup::ucx_test
