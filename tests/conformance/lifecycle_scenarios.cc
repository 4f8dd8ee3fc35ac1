// Failures over time: a rank that never joins (group and per-operation timeouts), abort
// from another thread, a wait with its own timeout, and a rank process that dies. The
// rank left out waits for rank 0's "done" file, so it neither joins nor leaves early.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "scenario.h"

namespace pgtest {
namespace {

using Clock = std::chrono::steady_clock;
// Added to "within two timeouts": the first timeout also gathers a hang report (about a
// second), and CI machines are shared.
constexpr double kSlack = 5;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string status_text(pg_status_t s) {
  return std::string(pg_status_name(s)) + ": " + pg_last_error();
}

// Every rank but 0 stays out until rank 0 is done.
bool sit_out(RankContext& ctx) {
  if (ctx.rank == 0) return false;
  ctx.report.step("staying out until rank 0 is done");
  ctx.report.expect(wait_for_file(ctx.dir + "/done", 120), "rank 0 never finished");
  ctx.group_failed = true;  // rank 0's failure may reach this rank's group too
  return true;
}

// After a failure, later operations fail fast with PG_ERR_ABORTED quoting it.
void expect_fails_fast(RankContext& ctx) {
  float x = 1;
  pg_buffer_t b = pg_buffer_cpu(&x, 1, PG_DTYPE_F32);
  const auto start = Clock::now();
  const pg_status_t s = pg_allreduce(ctx.group, nullptr, &b, nullptr, nullptr);
  ctx.report.expect(s == PG_ERR_ABORTED,
                    "the next operation returned " + status_text(s) + ", expected PG_ERR_ABORTED");
  ctx.report.expect(seconds_since(start) < 2.0,
                    "the next operation took " + std::to_string(seconds_since(start)) + " s");
}

void missing_rank_scenario(RankContext& ctx) {
  if (sit_out(ctx)) return;
  ctx.group_failed = true;
  float x[4] = {1, 2, 3, 4};
  pg_buffer_t b = pg_buffer_cpu(x, 4, PG_DTYPE_F32);
  const auto start = Clock::now();
  const pg_status_t s = pg_allreduce(ctx.group, nullptr, &b, nullptr, nullptr);
  const double took = seconds_since(start), t = ctx.group_timeout_s;
  const std::string message = pg_last_error();
  ctx.report.expect(s == PG_ERR_TIMEOUT, "allreduce without rank 1 returned " +
                                             std::string(pg_status_name(s)) + ": " + message);
  ctx.report.expect(message.find("allreduce #") != std::string::npos,
                    "the timeout message does not name the operation and its number: " + message);
  ctx.report.expect(took >= 0.9 * t && took <= 2 * t + kSlack,
                    "the timeout fired after " + std::to_string(took) +
                        " s; the group timeout is " + std::to_string(t) +
                        " s (allowed: up to two timeouts)");
  expect_fails_fast(ctx);
  touch_file(ctx.dir + "/done");
}

void op_timeout_scenario(RankContext& ctx) {
  if (sit_out(ctx)) return;
  ctx.group_failed = true;
  int32_t x = 1;
  pg_buffer_t b = pg_buffer_cpu(&x, 1, PG_DTYPE_I32);
  pg_op_options_t o = PG_OP_OPTIONS_INIT;
  o.timeout_ms = 2000;
  const auto start = Clock::now();
  const pg_status_t s = pg_allreduce(ctx.group, nullptr, &b, &o, nullptr);
  const double took = seconds_since(start);
  ctx.report.expect(s == PG_ERR_TIMEOUT,
                    "allreduce with timeout_ms 2000 returned " + status_text(s));
  ctx.report.expect(took >= 1.8 && took <= 2 * 2 + kSlack, "a 2 s operation timeout fired after " +
                                                               std::to_string(took) +
                                                               " s (the group timeout is 60 s)");
  expect_fails_fast(ctx);
  touch_file(ctx.dir + "/done");
}

void abort_scenario(RankContext& ctx) {
  if (sit_out(ctx)) return;
  ctx.group_failed = true;
  float x = 1;
  pg_buffer_t b = pg_buffer_cpu(&x, 1, PG_DTYPE_F32);
  pg_work_t w = nullptr;
  pg_status_t s = pg_allreduce(ctx.group, nullptr, &b, nullptr, &w);
  ctx.report.expect(s == PG_OK, "async allreduce: " + status_text(s));
  if (s != PG_OK) return touch_file(ctx.dir + "/done");
  pg_group_t g = ctx.group;
  std::thread watchdog([g] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    pg_group_abort(g);
  });
  const auto start = Clock::now();
  s = pg_work_wait(w, -1);
  const double took = seconds_since(start);
  watchdog.join();
  ctx.report.expect(s == PG_ERR_ABORTED,
                    "a wait ended by pg_group_abort returned " + status_text(s));
  ctx.report.expect(took < 10,
                    "pg_group_abort ended the wait only after " + std::to_string(took) + " s");
  pg_work_release(w);
  expect_fails_fast(ctx);
  touch_file(ctx.dir + "/done");
}

void own_timeout_scenario(RankContext& ctx) {
  if (ctx.rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  int32_t x = ctx.rank + 1;
  pg_buffer_t b = pg_buffer_cpu(&x, 1, PG_DTYPE_I32);
  pg_work_t w = nullptr;
  pg_status_t s = pg_allreduce(ctx.group, nullptr, &b, nullptr, &w);
  ctx.report.expect(s == PG_OK, "async allreduce: " + status_text(s));
  if (s != PG_OK) return;
  if (ctx.rank == 0) {
    s = pg_work_wait(w, 50);
    ctx.report.expect(s == PG_PENDING, "a 50 ms wait while rank 1 is 300 ms late returned " +
                                           std::string(pg_status_name(s)));
  }
  s = pg_work_wait(w, -1);
  ctx.report.expect(s == PG_OK && x == 3, "the wait after that returned " + status_text(s) +
                                              " with value " + std::to_string(x));
  ctx.report.expect(pg_work_test(w) == PG_OK, "pg_work_test after completion is not PG_OK");
  pg_work_release(w);
}

// Rank 1 exits without a word after a first allreduce; the others must fail (not hang)
// within two group timeouts, and fail fast afterwards.
void peer_exit_scenario(RankContext& ctx) {
  int32_t one = 1;
  pg_buffer_t b1 = pg_buffer_cpu(&one, 1, PG_DTYPE_I32);
  pg_status_t s = pg_allreduce(ctx.group, nullptr, &b1, nullptr, nullptr);
  ctx.report.expect(s == PG_OK && one == ctx.size, "first allreduce: " + status_text(s));
  if (ctx.rank == 1) {
    std::printf("%s\n", ctx.report.done_line().c_str());
    std::fflush(stdout);
    std::_Exit(0);  // as if the process crashed: no destroy, sockets closed by the kernel
  }
  ctx.group_failed = true;
  std::vector<float> v(1 << 16, 1.0f);
  pg_buffer_t b = pg_buffer_cpu(v.data(), v.size(), PG_DTYPE_F32);
  const auto start = Clock::now();
  s = pg_allreduce(ctx.group, nullptr, &b, nullptr, nullptr);
  const double took = seconds_since(start), t = ctx.group_timeout_s;
  ctx.report.expect(s == PG_ERR_PEER_LOST || s == PG_ERR_TIMEOUT || s == PG_ERR_ABORTED,
                    "allreduce after rank 1 died returned " + status_text(s));
  ctx.report.expect(took <= 2 * t + kSlack, "rank 1's death was noticed after " +
                                                std::to_string(took) + " s (group timeout " +
                                                std::to_string(t) + " s)");
  expect_fails_fast(ctx);
}

}  // namespace

void add_lifecycle_scenarios(std::vector<Scenario>& out) {
  out.push_back({"Lifecycle", "MissingRankTimesOut", missing_rank_scenario, 3, 60, 2});
  out.push_back({"Lifecycle", "OperationTimeout", op_timeout_scenario, 60, 60, 2});
  out.push_back({"Lifecycle", "AbortEndsPendingWait", abort_scenario, 60, 60, 2});
  out.push_back({"Lifecycle", "WaitWithOwnTimeout", own_timeout_scenario, 60, 60, 2});
  out.push_back({"Lifecycle", "PeerProcessExits", peer_exit_scenario, 5, 60, 3, true});
}

}  // namespace pgtest
