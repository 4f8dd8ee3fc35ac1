// The ucx plugin's group creation at sizes nobody fills: a rank given the largest size ucx
// takes returns within the timeout without allocating per absent peer, and a lazy connect
// to a peer that never joined ends at its operation's timeout.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <string>

#include "../../support/peak_rss.h"
#include "ucx_test_support.h"

namespace procgroup::ucx_test {
namespace {

using Clock = std::chrono::steady_clock;

using pgtest::peak_rss_kib;

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

// A lazily connected peer that never joined: the operation that first needs it ends at its
// own timeout, not the group's (the address lookup used to wait out the group timeout).
TEST(UcxRendezvous, ALazyConnectToAnAbsentPeerEndsAtTheOperationsTimeout) {
  WorldOptions options;
  options.create_group = false;
  options.env = {{"PROCGROUP_UCX_CONNECT_ALL_MAX", "1"}};
  run_world(1, options, [](RankEnv& env) {
    pg_backend_group_t group = nullptr;
    const pg_status_t created = create_group(*env.ops, *env.store, 0, 2, 20000, &group);
    env.expect_status(created, PG_OK, "lazy group_create alone: " + take_error());
    if (group == nullptr) return;
    env.group = group;
    int32_t x = 7;
    OpArgs a;
    a.peer = 1;  // never created its group
    a.timeout_ms = 500;
    const auto start = Clock::now();
    std::string error;
    const pg_status_t st =
        env.run(make_op(PG_OP_SEND, cpu(&x, 1, PG_DTYPE_I32), absent(), a), &error);
    const auto took =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    env.expect_status(st, PG_ERR_TIMEOUT, "send to a rank that never joined: " + error);
    // What was left of the operation's 500 ms when the lookup began, not the group's 20 s.
    static const std::regex said(R"(rank 1 never published its UCX address within (4\d\d|500) ms)");
    env.expect(std::regex_search(error, said), "names the peer and the time waited: " + error);
    env.expect(took < 2000, "ended after " + std::to_string(took) + " ms (its timeout: 500 ms)");
  });
}

}  // namespace
}  // namespace procgroup::ucx_test
