// The conformance binary: one GoogleTest test per backend x world size x scenario, named
// <Mode>/<Suite>.<Scenario>/<backend>_world<N> (Mode: Threads, Processes or Plugin).
//
//   conformance_test                                   every backend this build registered
//   conformance_test --backend /path/libprocgroup-mine.so [--ranks threads|processes]
//   conformance_test --conformance-worker <scenario>   one rank of a process-mode test
//
// GoogleTest's own flags (--gtest_filter, --gtest_list_tests, ...) work as usual.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "rank_runner.h"

#ifndef PG_CONFORMANCE_BACKENDS
#define PG_CONFORMANCE_BACKENDS ""
#endif

namespace pgtest {
namespace {

constexpr int kThreadWorlds[] = {1, 2, 3, 4, 5};  // threads are cheap: one size more
constexpr int kProcessWorlds[] = {1, 2, 3, 4};

std::vector<int> worlds_for(RankMode mode) {
  if (mode == RankMode::kThreads) return {std::begin(kThreadWorlds), std::end(kThreadWorlds)};
  return {std::begin(kProcessWorlds), std::end(kProcessWorlds)};
}

// Entries "label|threads-or-processes|plugin[|KEY=VALUE...]" separated by commas, written
// by CMake's procgroup_conformance_backend(); KEY=VALUE go to the rank processes.
std::vector<BackendSpec> built_in_backends() {
  std::vector<BackendSpec> out;
  const std::string list = PG_CONFORMANCE_BACKENDS;
  for (size_t at = 0; at < list.size();) {
    size_t end = list.find(',', at);
    if (end == std::string::npos) end = list.size();
    std::vector<std::string> fields;
    for (size_t f = at; f <= end;) {
      size_t bar = list.find('|', f);
      if (bar == std::string::npos || bar > end) bar = end;
      fields.push_back(list.substr(f, bar - f));
      f = bar + 1;
    }
    if (fields.size() >= 3) {
      const RankMode mode = fields[1] == "threads" ? RankMode::kThreads : RankMode::kProcesses;
      out.push_back({fields[0], fields[2], mode, worlds_for(mode),
                     std::vector<std::string>(fields.begin() + 3, fields.end())});
    }
    at = end + 1;
  }
  return out;
}

struct Options {
  std::string backend;  // --backend: a plugin name or path
  std::string ranks;    // --ranks: threads or processes
  std::string error;
};

// Takes our flags out of argv, leaving GoogleTest's.
Options take_options(int* argc, char** argv) {
  Options o;
  int kept = 1;
  for (int i = 1; i < *argc; ++i) {
    const std::string arg = argv[i];
    std::string* target = arg.rfind("--backend", 0) == 0 ? &o.backend
                          : arg.rfind("--ranks", 0) == 0 ? &o.ranks
                                                         : nullptr;
    if (target == nullptr) {
      argv[kept++] = argv[i];
      continue;
    }
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      *target = arg.substr(eq + 1);
    } else if (i + 1 < *argc) {
      *target = argv[++i];
    } else {
      o.error = arg + " needs a value";
    }
  }
  *argc = kept;
  argv[kept] = nullptr;
  if (!o.ranks.empty() && o.ranks != "threads" && o.ranks != "processes")
    o.error = "--ranks must be 'threads' or 'processes', not '" + o.ranks + "'";
  return o;
}

class ScenarioTest : public ::testing::Test {
 public:
  ScenarioTest(BackendSpec backend, int world, const Scenario* scenario, std::string self)
      : backend_(std::move(backend)), world_(world), scenario_(scenario), self_(std::move(self)) {}

  void TestBody() override {
    const std::vector<RankOutcome> outcomes = run_ranks(backend_, world_, *scenario_, self_);
    int checks = 0;
    for (const RankOutcome& o : outcomes) {
      checks += o.checks;
      const std::string prefix = "rank " + std::to_string(o.rank) + ": ";
      for (const std::string& p : o.problems)
        ADD_FAILURE() << (p.rfind(prefix, 0) == 0 ? "" : prefix) << p;
      if (!o.reported && o.problems.empty())
        ADD_FAILURE() << "rank " << o.rank << " did not finish the scenario";
    }
    EXPECT_GT(checks, 0) << "no rank checked anything";
    if (!outcomes.empty() && !outcomes[0].summary.empty()) {
      RecordProperty("rank0", outcomes[0].summary);
      std::printf("[  rank 0  ] %s\n", outcomes[0].summary.c_str());
    }
  }

 private:
  BackendSpec backend_;
  int world_;
  const Scenario* scenario_;
  std::string self_;
};

void register_backend(const std::string& prefix, const BackendSpec& backend,
                      const std::string& self) {
  for (const Scenario& s : all_scenarios()) {
    if (s.needs_processes && backend.mode == RankMode::kThreads) continue;
    const std::vector<int> worlds =
        s.fixed_world ? std::vector<int>{s.fixed_world} : backend.worlds;
    for (int world : worlds) {
      if (s.max_world > 0 && world > s.max_world) continue;
      const std::string suite = prefix + "/" + s.suite;
      const std::string name = std::string(s.name) + "/" + backend.label +
                               (s.fixed_world ? "" : "_world" + std::to_string(world));
      const Scenario* scenario = &s;
      ::testing::RegisterTest(
          suite.c_str(), name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
          [=]() -> ::testing::Test* { return new ScenarioTest(backend, world, scenario, self); });
    }
  }
}

std::string self_path() {
  char buffer[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : std::string();
}

}  // namespace
}  // namespace pgtest

int main(int argc, char** argv) {
  using namespace pgtest;
  if (argc == 3 && std::strcmp(argv[1], "--conformance-worker") == 0) return worker_main(argv[2]);
  Options options = take_options(&argc, argv);
  if (!options.error.empty()) {
    std::fprintf(stderr, "conformance_test: %s\n", options.error.c_str());
    return 2;
  }
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0)
      std::printf(
          "conformance_test [--backend NAME_OR_PATH [--ranks threads|processes]] [gtest flags]\n"
          "  --backend  run the suite against this plugin only (a name or a .so path)\n"
          "  --ranks    how its ranks run: processes (default) or threads (in-process plugins)\n"
          "See docs/conformance.md.\n\n");
  ::testing::InitGoogleTest(&argc, argv);
  const std::string self = self_path();
  const std::vector<BackendSpec> built_in = built_in_backends();
  // --backend replaces the built-in list; a plugin configured into the build
  // (PROCGROUP_CONFORMANCE_PLUGIN) runs beside it.
  if (options.backend.empty()) {
    for (const BackendSpec& b : built_in)
      register_backend(b.mode == RankMode::kThreads ? "Threads" : "Processes", b, self);
#ifdef PG_CONFORMANCE_DEFAULT_PLUGIN
    options.backend = PG_CONFORMANCE_DEFAULT_PLUGIN;
    if (options.ranks.empty()) options.ranks = PG_CONFORMANCE_DEFAULT_RANKS;
#endif
  }
  if (!options.backend.empty()) {
    // A built-in name keeps its registered mode; anything else runs in processes.
    BackendSpec plugin{"plugin", options.backend, RankMode::kProcesses, {}, {}};
    for (const BackendSpec& b : built_in)
      if (b.plugin == options.backend) plugin = b;
    if (!options.ranks.empty())
      plugin.mode = options.ranks == "threads" ? RankMode::kThreads : RankMode::kProcesses;
    plugin.worlds = worlds_for(plugin.mode);
    register_backend("Plugin", plugin, self);
  }
  return RUN_ALL_TESTS();
}
