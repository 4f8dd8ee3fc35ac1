// The conformance binary: one GoogleTest test per backend x world size x scenario, named
// <Mode>/<Suite>.<Scenario>/<backend>_world<N> (Mode: Threads, Processes or Plugin).
//
//   conformance_test                                   every backend this build registered
//   conformance_test --backend /path/libprocgroup-mine.so [--ranks threads|processes]
//   conformance_test --device cuda [--backend nccl]     the collectives on CUDA buffers
//   conformance_test --conformance-worker <scenario>   one rank of a process-mode test
//
// With --backend, the end of the run prints a summary for the plugin's author: a table of
// ok/FAIL per operation and dtype, then the capabilities the plugin declared next to the
// cases that ran natively, by emulation in the core, or were refused (docs/conformance.md).
//
// GoogleTest's own flags (--gtest_filter, --gtest_list_tests, ...) work as usual.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "cuda_staging.h"
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

// The items of "a+b+c".
std::vector<std::string> plus_list(const std::string& text) {
  std::vector<std::string> items;
  for (size_t at = 0; at <= text.size();) {
    size_t plus = text.find('+', at);
    if (plus == std::string::npos) plus = text.size();
    if (plus > at) items.push_back(text.substr(at, plus - at));
    at = plus + 1;
  }
  return items;
}

// Entries "label|threads-or-processes|plugin[|KEY=VALUE...]" separated by commas, written
// by CMake's procgroup_conformance_backend(); KEY=VALUE go to the rank processes, except
// the suite's own "scenarios=A+B" (run only these) and "worlds=2+3+5" (these world sizes).
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
      BackendSpec spec{fields[0], fields[2], mode, worlds_for(mode), {}, {}};
      for (size_t f = 3; f < fields.size(); ++f) {
        if (fields[f].rfind("scenarios=", 0) == 0) {
          spec.scenarios = plus_list(fields[f].substr(10));
        } else if (fields[f].rfind("worlds=", 0) == 0) {
          spec.worlds.clear();
          for (const std::string& w : plus_list(fields[f].substr(7)))
            spec.worlds.push_back(std::stoi(w));
        } else {
          spec.env.push_back(fields[f]);
        }
      }
      out.push_back(std::move(spec));
    }
    at = end + 1;
  }
  return out;
}

struct Options {
  std::string backend;  // --backend: a plugin name or path
  std::string ranks;    // --ranks: threads or processes
  std::string device;   // --device: cpu (default) or cuda
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
                          : arg.rfind("--device", 0) == 0 ? &o.device
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
  if (!o.device.empty() && o.device != "cpu" && o.device != "cuda")
    o.error = "--device must be 'cpu' or 'cuda', not '" + o.device + "'";
  return o;
}

// Every case of the run, summed over tests and ranks, for the --backend summary.
std::mutex g_tally_mutex;
Tally g_tally;

bool has_bit(uint32_t mask, int bit) { return ((mask >> bit) & 1u) != 0; }

std::string bit_names(uint32_t mask, int first, int count, const char* (*name)(int)) {
  std::string out;
  for (int bit = first; bit < count; ++bit)
    if (has_bit(mask, bit)) out += (out.empty() ? "" : " ") + std::string(name(bit));
  return out.empty() ? "(none)" : out;
}

// The summary printed at the end of a --backend run.
std::string format_summary(const Tally& t, const std::string& backend) {
  constexpr int kRows[] = {PG_OP_ALLREDUCE,      PG_OP_BROADCAST, PG_OP_REDUCE,  PG_OP_ALLGATHER,
                           PG_OP_REDUCE_SCATTER, PG_OP_GATHER,    PG_OP_SCATTER, PG_OP_ALLTOALL,
                           PG_OP_BARRIER,        PG_OP_SEND};
  constexpr int kUnsupported = static_cast<int>(Route::kUnsupported);
  auto row_name = [](int op) {
    return op == PG_OP_SEND ? std::string("send/recv") : std::string(op_name(pg_op_t(op)));
  };
  // ok: every case passed (cases refused as unsupported, as the route says they must be, do
  // not count); FAIL: one failed; n/a: only refused as unsupported; -: none ran.
  auto cell = [&](int op, int dtype) {
    int passed = 0, failed = 0, refused = 0;
    for (int r = 0; r < Tally::kRoutes; ++r) {
      failed += t.failed[op][dtype][r];
      (r == kUnsupported ? refused : passed) += t.passed[op][dtype][r];
    }
    return failed > 0 ? "FAIL" : passed > 0 ? "ok" : refused > 0 ? "n/a" : "-";
  };
  std::string out;
  char line[256];
  out += "\n[ summary  ] " + backend +
         ": cases by operation and dtype, over every world size and scenario\n"
         "             (ok: all passed, FAIL: one or more failed, n/a: refused as unsupported, "
         "-: not run)\n";
  std::snprintf(line, sizeof(line), "  %-15s", "");
  out += line;
  for (pg_dtype_t d : all_dtypes()) {
    std::snprintf(line, sizeof(line), " %-5s", dtype_name(d));
    out += line;
  }
  auto end_line = [&out] {
    while (!out.empty() && out.back() == ' ') out.pop_back();
    out += "\n";
  };
  end_line();
  for (int op : kRows) {
    std::snprintf(line, sizeof(line), "  %-15s", row_name(op).c_str());
    out += line;
    if (op == PG_OP_BARRIER) {
      out += std::string(" ") + cell(op, PG_DTYPE_INVALID) + " (no dtype)\n";
      continue;
    }
    for (pg_dtype_t d : all_dtypes()) {
      std::snprintf(line, sizeof(line), " %-5s", cell(op, d));
      out += line;
    }
    end_line();
  }
  if (!t.has_caps) return out + "  (no rank reported the plugin's capabilities)\n";
  const pg_capabilities_t& c = t.caps;
  out += "\n[ summary  ] declared by pg_group_capabilities:\n";
  out += "  native ops:        " +
         bit_names(c.native_ops, 0, PG_OP_COUNT_, [](int b) { return op_name(pg_op_t(b)); }) + "\n";
  out += "  native dtypes:     " +
         bit_names(c.native_dtypes, 1, PG_DTYPE_COUNT_,
                   [](int b) { return dtype_name(pg_dtype_t(b)); }) +
         "\n";
  out += "  native reduce ops: " +
         bit_names(c.native_reduce_ops, 0, PG_REDUCE_COUNT_,
                   [](int b) { return reduce_op_name(pg_reduce_op_t(b)); }) +
         "\n";
  out += "  devices:           " +
         bit_names(c.devices, 0, PG_DEVICE_COUNT_,
                   [](int b) { return b == PG_DEVICE_CPU ? "cpu" : "cuda"; }) +
         " (the suite runs CPU buffers only)\n";
  out += "\n[ summary  ] declared versus what ran (cases summed over ranks, passed/run):\n";
  static constexpr const char* kRouteLabels[] = {"native", "native sum + core scaling",
                                                 "emulated by the core", "refused as unsupported"};
  for (int op : kRows) {
    const bool declared =
        op == PG_OP_SEND ? has_bit(c.native_ops, PG_OP_SEND) && has_bit(c.native_ops, PG_OP_RECV)
                         : has_bit(c.native_ops, op);
    int passed[Tally::kRoutes] = {}, run[Tally::kRoutes] = {};
    for (int d = 0; d < Tally::kDtypes; ++d)
      for (int r = 0; r < Tally::kRoutes; ++r) {
        passed[r] += t.passed[op][d][r];
        run[r] += t.passed[op][d][r] + t.failed[op][d][r];
      }
    std::string text = row_name(op) + ": ";
    std::string routes;
    int first = 0;
    if (declared && run[0] == 0) {
      text += "declared native, no native case ran";
      first = 1;
    } else if (declared) {
      text += "declared native, native cases passed " + std::to_string(passed[0]) + "/" +
              std::to_string(run[0]);
      first = 1;
    } else {
      text += "not declared";
    }
    for (int r = first; r < Tally::kRoutes; ++r) {
      if (run[r] == 0) continue;
      const char* why = r == 0                         ? " (through another declared op)"
                        : declared && r < kUnsupported ? " (dtype or reduce op not declared)"
                                                       : "";
      routes += (routes.empty() ? "" : ", ") + std::string(kRouteLabels[r]) + why + ": " +
                std::to_string(passed[r]) + "/" + std::to_string(run[r]) + " passed";
    }
    if (!routes.empty()) text += declared ? "; " + routes : " (" + routes + ")";
    if (!declared && routes.empty()) text += " (not run)";
    out += "  " + text + "\n";
  }
  return out;
}

class SummaryPrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit SummaryPrinter(std::string backend) : backend_(std::move(backend)) {}
  void OnTestProgramEnd(const ::testing::UnitTest&) override {
    std::lock_guard lock(g_tally_mutex);
    std::printf("%s", format_summary(g_tally, backend_).c_str());
    std::fflush(stdout);
  }

 private:
  std::string backend_;
};

class ScenarioTest : public ::testing::Test {
 public:
  ScenarioTest(BackendSpec backend, int world, const Scenario* scenario, std::string self)
      : backend_(std::move(backend)), world_(world), scenario_(scenario), self_(std::move(self)) {}

  void TestBody() override {
    if (cuda_mode()) {
      std::string why;
      const int devices = cuda_device_count(&why);
      if (devices == 0) GTEST_SKIP() << why;
      std::printf("[   cuda   ] %d device(s): world sizes 1..%d (NCCL needs one device per rank)\n",
                  devices, std::min(devices, 4));
      if (world_ > devices) GTEST_SKIP() << "world size " << world_ << " needs " << world_
                                         << " CUDA devices; this host has " << devices;
    }
    const std::vector<RankOutcome> outcomes = run_ranks(backend_, world_, *scenario_, self_);
    int checks = 0;
    for (const RankOutcome& o : outcomes) {
      checks += o.checks;
      {
        std::lock_guard lock(g_tally_mutex);
        g_tally.merge(o.tally);
      }
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
                      const std::string& self, const char* only_suite = nullptr) {
  for (const Scenario& s : all_scenarios()) {
    if (s.needs_processes && backend.mode == RankMode::kThreads) continue;
    if (only_suite != nullptr && std::strcmp(s.suite, only_suite) != 0) continue;
    const bool listed = std::find(backend.scenarios.begin(), backend.scenarios.end(), s.name) !=
                        backend.scenarios.end();
    if ((!backend.scenarios.empty() || s.on_request) && !listed) continue;
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
  const char* device = std::getenv("PGCONF_DEVICE");  // rank processes of a CUDA run
  set_cuda_mode(device != nullptr && std::strcmp(device, "cuda") == 0);
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
          "  --device   cuda: the collectives on CUDA buffers (default backend nccl), ranks as\n"
          "             processes on devices 0..min(devices, 4) - 1; skips without a device\n"
          "  --conformance-worker SCENARIO\n"
          "             one rank of a process-mode test, as the suite starts it (to debug one)\n"
          "See docs/conformance.md.\n\n");
  ::testing::InitGoogleTest(&argc, argv);
  const std::string self = self_path();
  const std::vector<BackendSpec> built_in = built_in_backends();
  if (options.device == "cuda") {
    // Device memory: only the collectives (the other scenarios pass CPU buffers). One rank
    // per device, as NCCL requires; without a device one test per scenario skips.
    set_cuda_mode(true);
    std::string why;
    const int devices = std::max(1, std::min(cuda_device_count(&why), 4));
    std::vector<int> worlds;
    for (int w = 1; w <= devices; ++w) worlds.push_back(w);
    const std::string plugin = options.backend.empty() ? "nccl" : options.backend;
    register_backend("Cuda",
                     BackendSpec{options.backend.empty() ? "nccl" : "plugin", plugin,
                                 RankMode::kProcesses, worlds, {"PGCONF_DEVICE=cuda"}, {}},
                     self, "Collectives");
    return RUN_ALL_TESTS();
  }
  if (!options.backend.empty())  // an explicit --backend: its author gets the summary
    ::testing::UnitTest::GetInstance()->listeners().Append(new SummaryPrinter(options.backend));
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
    BackendSpec plugin{"plugin", options.backend, RankMode::kProcesses, {}, {}, {}};
    for (const BackendSpec& b : built_in)  // the first: the plain entry, not a tuning variant
      if (b.plugin == options.backend) {
        plugin = b;
        break;
      }
    if (!options.ranks.empty())
      plugin.mode = options.ranks == "threads" ? RankMode::kThreads : RankMode::kProcesses;
    plugin.worlds = worlds_for(plugin.mode);
    register_backend("Plugin", plugin, self);
  }
  return RUN_ALL_TESTS();
}
