// A scenario is what every rank of one conformance test runs: a function of the rank's
// group that records what it checked and what went wrong in a Report. The same function
// runs on threads (in-process backends) and in rank processes (everything else), so a
// scenario uses no gtest assertions: the runner turns the ranks' reports into failures.
//
//   void my_scenario(RankContext& ctx) {
//     ctx.report.expect(ctx.size > 0, "size is positive");
//   }
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "collective_check.h"
#include "procgroup/procgroup.h"

namespace pgtest {

// Cases by (op, dtype, route), passed and failed, and the capabilities the backend declared:
// what `--backend` runs sum up into the summary table. Send and recv count as PG_OP_SEND;
// barrier as dtype PG_DTYPE_INVALID (it has none).
struct Tally {
  static constexpr int kOps = PG_OP_COUNT_, kDtypes = PG_DTYPE_COUNT_, kRoutes = 4;
  int passed[kOps][kDtypes][kRoutes] = {};
  int failed[kOps][kDtypes][kRoutes] = {};
  bool has_caps = false;
  pg_capabilities_t caps = PG_CAPABILITIES_INIT;

  void add(pg_op_t op, pg_dtype_t dtype, Route route, bool ok);
  void set_caps(const pg_capabilities_t& c) {
    caps = c;
    has_caps = true;
  }
  void merge(const Tally& other);  // adds the counts; takes other's caps if it has none
  // Lines a rank process prints ("pgconf-tally ...", "pgconf-caps ..."), and their parser
  // (false if `line` is not one).
  std::vector<std::string> lines() const;
  bool parse_line(std::string_view line);
};

// What one rank checked and the first failures (each a one-line message).
class Report {
 public:
  void fail(const std::string& message);
  void expect(bool ok, const std::string& message) { ok ? checked() : fail(message); }
  void checked() { ++checks_; }
  // Rank processes echo failures (and each case before it starts, to locate a hang) as
  // they happen, so a rank killed at the wall-clock bound still tells its story.
  void echo_to(std::FILE* out) { echo_ = out; }
  // Names the step about to start (echoed in rank processes; the last one locates a hang).
  void step(const std::string& what);
  void counted(Route route);  // one collective case checked, by the route it took
  // Runs a case (run_case) and records it.
  void run(pg_group_t group, int rank, int size, const pg_capabilities_t& caps,
           const CollectiveCase& c);

  // One case of `op` in `dtype` that took `route`, for the summary table (counted() and
  // run() call it for collectives; point-to-point and barrier scenarios call it directly).
  void tally(pg_op_t op, pg_dtype_t dtype, Route route, bool ok) {
    tally_.add(op, dtype, route, ok);
  }
  Tally& tally() { return tally_; }
  const Tally& tally() const { return tally_; }

  int failures() const { return failures_; }
  int checks() const { return checks_; }
  const std::vector<std::string>& messages() const { return messages_; }
  // "1307 checks, 0 failures; cases: 1280 native, 24 emulated by the core"
  std::string summary() const;
  // The line a rank process prints last, and its parser (false if `line` is not one).
  std::string done_line() const;
  static bool parse_done_line(std::string_view line, int* checks, int* failures,
                              std::string* summary);

 private:
  static constexpr size_t kKeptMessages = 12;
  int checks_ = 0, failures_ = 0;
  int by_route_[4] = {0, 0, 0, 0};
  std::vector<std::string> messages_;
  std::FILE* echo_ = nullptr;
  Tally tally_;
};

struct RankContext {
  pg_group_t group = nullptr;
  int rank = 0;
  int size = 1;
  pg_capabilities_t caps = PG_CAPABILITIES_INIT;
  std::string dir;         // private to this run, shared by its ranks: coordination files
  bool processes = false;  // ranks are processes, not threads of one process
  double group_timeout_s = 60;
  Report report;
  // The scenario made the group fail on purpose: its destroy may report that failure.
  bool group_failed = false;
  // Checks that must run after pg_group_destroy returned (detached works, ...).
  std::vector<std::function<void()>> after_destroy;
};

struct Scenario {
  const char* suite;  // "Collectives", "Lifecycle"
  const char* name;   // the test name: "Allreduce"
  void (*run)(RankContext&);
  double group_timeout_s;  // the group timeout (PROCGROUP_TIMEOUT) the ranks run with
  double wall_s;           // bound on the whole run; ranks still running are then killed
  int fixed_world = 0;     // 0: every world size of the backend
  bool needs_processes = false;
  int max_world = 0;  // 0: no cap on the backend's world sizes
  // Only for a backend entry that names it in scenarios= (a tuning variant's extra sizes).
  bool on_request = false;
};

// Every scenario, in registration order.
const std::vector<Scenario>& all_scenarios();
const Scenario* find_scenario(std::string_view name);

// Scenario families, defined in their own files.
void add_collective_scenarios(std::vector<Scenario>& out);
void add_p2p_scenarios(std::vector<Scenario>& out);
void add_group_scenarios(std::vector<Scenario>& out);
void add_lifecycle_scenarios(std::vector<Scenario>& out);

// Collectives number first .. first + count - 1 of a sequence cycling through every op,
// dtype, reduce op, root and in-place form, started asynchronously; nullptr where the
// submission failed (reported).
std::vector<std::unique_ptr<PendingCheck>> start_mixed_cases(RankContext& ctx, int first,
                                                             int count);
// Waits for a started case, verifies and releases it, and records the outcome.
void finish_case(RankContext& ctx, PendingCheck* check);

// Coordination between ranks through files in RankContext::dir.
void touch_file(const std::string& path);
bool wait_for_file(const std::string& path, double timeout_s);

}  // namespace pgtest
