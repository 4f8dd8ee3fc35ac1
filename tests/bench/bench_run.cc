// Running the benchmark tools from tests (see bench_run.h).
#include "bench_run.h"

#include <gtest/gtest.h>

#include <sstream>

namespace procgroup::testing {
namespace {

constexpr double kTimeoutS = 180;

BenchRun run_tool(std::vector<std::string> argv, bool want_csv,
                  const std::vector<std::string>& env) {
  TempDir dir;
  const std::string json_path = dir.str() + "/out.json";
  const std::string csv_path = dir.str() + "/out.csv";
  argv.insert(argv.end(), {"--json", json_path});
  if (want_csv) argv.insert(argv.end(), {"--csv", csv_path});
  BenchRun out;
  out.result = run(argv, kTimeoutS, env);
  const std::string text = read_file(json_path);
  if (!text.empty()) {
    try {
      out.json = nlohmann::json::parse(text);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "the JSON does not parse: " << e.what() << "\n" << text;
    }
  }
  if (want_csv) out.csv = read_file(csv_path);
  return out;
}

}  // namespace

BenchRun run_collbench(int ranks, std::vector<std::string> args, bool want_csv,
                       const std::vector<std::string>& extra_env) {
  std::vector<std::string> argv{PGRUN_PATH, "--nproc-per-node", std::to_string(ranks),
                                COLLBENCH_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  // extra_env may replace the defaults (e.g. PROCGROUP_BACKEND=nccl).
  std::vector<std::string> env = extra_env;
  for (const std::string& d :
       {std::string("PROCGROUP_BACKEND=gloo"), std::string("PROCGROUP_TIMEOUT=60")}) {
    const std::string key = d.substr(0, d.find('=') + 1);
    bool given = false;
    for (const std::string& e : extra_env) given = given || e.rfind(key, 0) == 0;
    if (!given) env.push_back(d);
  }
  return run_tool(std::move(argv), want_csv, env);
}

BenchRun run_mpi_collbench(int ranks, std::vector<std::string> args, bool want_csv) {
  // As tests/mp/launch_test.cc: TCP between the ranks, no rsh agent lookup, no torchrun
  // variables leaking in from a surrounding launcher.
  std::vector<std::string> argv{MPIRUN_PATH,
                                "--allow-run-as-root",
                                "--oversubscribe",
                                "-np",
                                std::to_string(ranks),
                                "--mca",
                                "btl",
                                "self,tcp",
                                MPI_COLLBENCH_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_tool(std::move(argv), want_csv, {"RANK=", "WORLD_SIZE=", "OMPI_MCA_plm_rsh_agent="});
}

int64_t wrong_in_row(const nlohmann::json& row) {
  int64_t wrong = 0;
  for (const char* key : {"out_of_place", "in_place", "direct"}) {
    if (!row.contains(key) || row[key].is_null()) continue;
    const auto& w = row[key]["wrong"];
    wrong += w.is_null() ? 0 : w.get<int64_t>();
  }
  return wrong;
}

std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> fields;
    std::string field;
    std::istringstream cells(line);
    while (std::getline(cells, field, ',')) fields.push_back(field);
    if (!line.empty() && line.back() == ',') fields.emplace_back();  // a trailing empty cell
    lines.push_back(std::move(fields));
  }
  return lines;
}

}  // namespace procgroup::testing
