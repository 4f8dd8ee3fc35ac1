// Runs fault_worker under pgrun and parses its report lines (see fault_worker.cc):
//
//   FaultRun run = run_workers({.backend = "gloo", .args = {"between", "--victim", "1"}});
//   const WorkerLine* r = run.find("RESULT", 0);   // rank 0's result, or nullptr
//   EXPECT_EQ(r->field("status"), "PG_ERR_PEER_LOST");
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "subprocess.h"

namespace procgroup::testing {

struct WorkerLine {
  std::string kind;  // FAULT, RESULT, LATER, NEXT, PID, EXIT, CORRUPT, CHECKED, DATA
  int rank = -1;
  std::map<std::string, std::string> fields;  // key=value pairs before msg=
  std::string msg;                            // everything after " msg="
  std::string field(const std::string& key) const;
  int64_t number(const std::string& key) const;  // -1 when absent
};

struct RunSpec {
  std::string backend = "gloo";
  int nproc = 3;
  std::vector<std::string> args;        // fault_worker arguments
  std::vector<std::string> env;         // extra KEY=VALUE for pgrun and the ranks
  std::vector<std::string> pgrun_args;  // extra pgrun options, before the program
  std::vector<std::string> wrapper;     // runs pgrun through this ("ip netns exec ns0")
  int timeout_s = 4;                    // PROCGROUP_TIMEOUT
  double kill_grace_s = 12;
  double limit_s = 60;  // the whole run; past it the test fails (pgrun is killed)
};

struct FaultRun {
  ProcessResult pgrun;
  std::vector<WorkerLine> lines;
  // The first line of that kind from that rank, or nullptr.
  const WorkerLine* find(const std::string& kind, int rank) const;
  int64_t fault_ms() const;  // the victim's FAULT time, -1 if none
  std::string log() const { return pgrun.out + pgrun.err; }
};

FaultRun run_workers(const RunSpec& spec);

// The same in two steps, for runs that must overlap (one pgrun per "host").
std::unique_ptr<Subprocess> start_workers(const RunSpec& spec);
FaultRun parse_run(ProcessResult pgrun);

const char* pgrun_path();
const char* fault_worker_path();

// Every process backend this build has ("gloo", "ucx").
std::vector<std::string> process_backends();

}  // namespace procgroup::testing
