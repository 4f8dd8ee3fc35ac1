// Runs a scenario on every rank of a fresh group and collects what each rank reported.
// - Threads: ranks are threads of this process (in-process backends: loopback, ...),
//   sharing a file store in a private directory. A watchdog ends the process with a
//   message if the ranks outlive the scenario's wall-clock bound.
// - Processes: ranks are copies of this binary started as `<self> --conformance-worker
//   <scenario>` with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
//   MASTER_PORT (a port bound and released just before), PROCGROUP_BACKEND and
//   PROCGROUP_TIMEOUT set, so they create the group from the environment exactly like a
//   user's program; output goes to one log per rank. Ranks still running at the
//   wall-clock bound are killed; ranks die with the parent (PR_SET_PDEATHSIG).
//
//   auto outcomes = run_ranks(BackendSpec{"gloo", "gloo", RankMode::kProcesses}, 3, s, self);
#pragma once

#include <string>
#include <vector>

#include "scenario.h"

namespace pgtest {

enum class RankMode { kThreads, kProcesses };

struct BackendSpec {
  std::string label;   // in test names: "gloo", "plugin"
  std::string plugin;  // name or .so path, as PROCGROUP_BACKEND takes it
  RankMode mode = RankMode::kProcesses;
  std::vector<int> worlds;
  std::vector<std::string> env;  // extra KEY=VALUE for the rank processes (processes only)
  // Only these scenarios (by name); empty: every one. A tuning variant of a backend (an
  // algorithm forced through its environment) runs just the scenarios that reach it.
  std::vector<std::string> scenarios;
};

struct RankOutcome {
  int rank = 0;
  bool reported = false;  // ran to the end of the scenario and reported
  int checks = 0;
  int failures = 0;
  std::string summary;                // Report::summary() of the rank
  Tally tally;                        // Report::tally() of the rank
  std::vector<std::string> problems;  // failures, abnormal exits, timeouts, output tails
};

std::vector<RankOutcome> run_on_threads(const BackendSpec& backend, int world,
                                        const Scenario& scenario);
std::vector<RankOutcome> run_in_processes(const BackendSpec& backend, int world,
                                          const Scenario& scenario, const std::string& self_exe);
inline std::vector<RankOutcome> run_ranks(const BackendSpec& backend, int world,
                                          const Scenario& scenario, const std::string& self_exe) {
  return backend.mode == RankMode::kThreads ? run_on_threads(backend, world, scenario)
                                            : run_in_processes(backend, world, scenario, self_exe);
}

// The body of a rank process (`--conformance-worker <scenario>`): its exit status.
int worker_main(const std::string& scenario_name);

// Runs the scenario on one rank's group, destroys the group, runs the after-destroy
// checks. Shared by both modes.
void run_rank(RankContext& ctx, const Scenario& scenario, pg_group_t group);

}  // namespace pgtest
