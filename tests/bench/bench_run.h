// Helpers for the benchmark tests: run collbench under pgrun, or mpi_collbench under mpirun,
// with a time bound, and read back the JSON (and CSV) it wrote.
//
//   BenchRun run = run_collbench(2, {"allreduce", "-b", "8", "-e", "1K"});
//   EXPECT_EQ(run.result.exit_code, 0) << run.result.out << run.result.err;
//   EXPECT_EQ(run.json["wrong_total"], 0);
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "subprocess.h"

namespace procgroup::testing {

struct BenchRun {
  ProcessResult result;
  nlohmann::json json;  // null when the tool wrote none (or it did not parse: a test failure)
  std::string csv;      // empty unless asked for
};

// pgrun --nproc-per-node ranks collbench args... --json F [--csv F], on the gloo backend with
// a 60 s group timeout unless extra_env sets PROCGROUP_BACKEND or PROCGROUP_TIMEOUT.
BenchRun run_collbench(int ranks, std::vector<std::string> args, bool want_csv = false,
                       const std::vector<std::string>& extra_env = {});

// mpirun -np ranks mpi_collbench args... --json F [--csv F].
BenchRun run_mpi_collbench(int ranks, std::vector<std::string> args, bool want_csv = false);

// Every element of a row's measurements that was checked: 0 when all are right.
int64_t wrong_in_row(const nlohmann::json& row);

// The names of a CSV header line, and the fields of each following line.
std::vector<std::vector<std::string>> parse_csv(const std::string& text);

}  // namespace procgroup::testing
