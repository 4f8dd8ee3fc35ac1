#include "fault_run.h"

#include <sstream>

namespace procgroup::testing {
namespace {

// "[rank 2] RESULT rank=2 op=x status=PG_OK t_ms=1 took_ms=0 msg=text" -> WorkerLine.
bool parse_line(const std::string& raw, WorkerLine* out) {
  std::string line = raw;
  if (line.rfind("[rank ", 0) == 0) {
    size_t close = line.find("] ");
    if (close == std::string::npos) return false;
    line = line.substr(close + 2);
  }
  static const char* const kKinds[] = {"FAULT", "RESULT",  "LATER",   "NEXT", "PID",
                                       "EXIT",  "CORRUPT", "CHECKED", "DATA"};
  size_t space = line.find(' ');
  if (space == std::string::npos) return false;
  const std::string kind = line.substr(0, space);
  bool known = false;
  for (const char* k : kKinds) known = known || kind == k;
  if (!known) return false;
  WorkerLine w;
  w.kind = kind;
  std::string rest = line.substr(space + 1);
  size_t msg_at = rest.find("msg=");
  if (msg_at != std::string::npos) {
    w.msg = rest.substr(msg_at + 4);
    rest = rest.substr(0, msg_at);
  }
  std::istringstream in(rest);
  std::string pair;
  while (in >> pair) {
    size_t eq = pair.find('=');
    if (eq != std::string::npos) w.fields[pair.substr(0, eq)] = pair.substr(eq + 1);
  }
  w.rank = static_cast<int>(w.number("rank"));
  *out = std::move(w);
  return true;
}

}  // namespace

std::string WorkerLine::field(const std::string& key) const {
  auto it = fields.find(key);
  return it == fields.end() ? "" : it->second;
}

int64_t WorkerLine::number(const std::string& key) const {
  auto it = fields.find(key);
  return it == fields.end() || it->second.empty() ? -1 : std::stoll(it->second);
}

const WorkerLine* FaultRun::find(const std::string& kind, int rank) const {
  for (const WorkerLine& w : lines)
    if (w.kind == kind && w.rank == rank) return &w;
  return nullptr;
}

int64_t FaultRun::fault_ms() const {
  for (const WorkerLine& w : lines)
    if (w.kind == "FAULT") return w.number("t_ms");
  return -1;
}

namespace {

std::vector<std::string> pgrun_argv(const RunSpec& spec) {
  std::vector<std::string> argv = spec.wrapper;
  argv.insert(argv.end(), {PGRUN_PATH, "--nproc-per-node", std::to_string(spec.nproc),
                           "--kill-grace", std::to_string(spec.kill_grace_s)});
  argv.insert(argv.end(), spec.pgrun_args.begin(), spec.pgrun_args.end());
  argv.push_back(FAULT_WORKER_PATH);
  argv.insert(argv.end(), spec.args.begin(), spec.args.end());
  return argv;
}

std::vector<std::string> pgrun_env(const RunSpec& spec) {
  std::vector<std::string> env{"PROCGROUP_BACKEND=" + spec.backend,
                               "PROCGROUP_TIMEOUT=" + std::to_string(spec.timeout_s)};
  env.insert(env.end(), spec.env.begin(), spec.env.end());
  return env;
}

}  // namespace

FaultRun parse_run(ProcessResult pgrun) {
  FaultRun result;
  result.pgrun = std::move(pgrun);
  std::istringstream out(result.pgrun.out);
  std::string line;
  while (std::getline(out, line)) {
    WorkerLine w;
    if (parse_line(line, &w)) result.lines.push_back(std::move(w));
  }
  return result;
}

FaultRun run_workers(const RunSpec& spec) {
  return parse_run(run(pgrun_argv(spec), spec.limit_s, pgrun_env(spec)));
}

std::unique_ptr<Subprocess> start_workers(const RunSpec& spec) {
  return std::make_unique<Subprocess>(pgrun_argv(spec), pgrun_env(spec));
}

const char* pgrun_path() { return PGRUN_PATH; }
const char* fault_worker_path() { return FAULT_WORKER_PATH; }

std::vector<std::string> process_backends() {
  std::vector<std::string> names;
  std::istringstream in(FAULT_BACKENDS);
  std::string name;
  while (std::getline(in, name, ',')) {
    if (!name.empty()) names.push_back(name);
  }
  return names;
}

}  // namespace procgroup::testing
