// Ranks as threads of this process, and the per-rank sequence both modes share.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rank_runner.h"
#include "temp_dir.h"

namespace pgtest {
namespace {

// Ends the process with a message when the ranks outlive their bound: threads cannot be
// killed, and a stuck ctest is worse than a failed one.
class Watchdog {
 public:
  Watchdog(double seconds, std::string what) : what_(std::move(what)) {
    thread_ = std::thread([this, seconds] {
      std::unique_lock lock(mutex_);
      if (cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; }))
        return;
      std::fprintf(stderr, "conformance: %s still running after %.0f s: aborting the process\n",
                   what_.c_str(), seconds);
      std::fflush(stderr);
      std::_Exit(3);
    });
  }
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::string what_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace

void run_rank(RankContext& ctx, const Scenario& scenario, pg_group_t group) {
  ctx.group = group;
  int32_t rank = -1, size = -1;
  pg_group_rank(group, &rank);
  pg_group_size(group, &size);
  ctx.report.expect(rank == ctx.rank && size == ctx.size,
                    "the group says rank " + std::to_string(rank) + " of " + std::to_string(size) +
                        ", expected " + std::to_string(ctx.rank) + " of " +
                        std::to_string(ctx.size));
  const pg_status_t caps = pg_group_capabilities(group, &ctx.caps);
  ctx.report.expect(caps == PG_OK, std::string("pg_group_capabilities: ") + pg_last_error());
  if (caps == PG_OK) ctx.report.tally().set_caps(ctx.caps);
  scenario.run(ctx);
  const pg_status_t destroyed = pg_group_destroy(group);
  if (!ctx.group_failed)
    ctx.report.expect(destroyed == PG_OK, "rank " + std::to_string(ctx.rank) +
                                              ": pg_group_destroy: " + pg_status_name(destroyed) +
                                              ": " + pg_last_error());
  for (auto& check : ctx.after_destroy) check();
}

std::vector<RankOutcome> run_on_threads(const BackendSpec& backend, int world,
                                        const Scenario& scenario) {
  TempDir dir;
  std::vector<RankOutcome> outcomes(world);
  if (!dir.ok() || !backend.env.empty()) {
    outcomes[0].problems.push_back(dir.ok() ? "a backend with its own environment needs ranks "
                                              "in processes"
                                            : "cannot create a temporary directory");
    return outcomes;
  }
  std::error_code ignored;
  std::filesystem::create_directory(dir.path() + "/store", ignored);
  const std::string store = "file://" + dir.path() + "/store";
  std::vector<std::unique_ptr<RankContext>> contexts;
  for (int rank = 0; rank < world; ++rank) {
    contexts.push_back(std::make_unique<RankContext>());
    contexts.back()->rank = rank;
    contexts.back()->size = world;
    contexts.back()->dir = dir.path();
    contexts.back()->group_timeout_s = scenario.group_timeout_s;
  }
  {
    Watchdog watchdog(scenario.wall_s, std::string(scenario.name) + " on " + backend.label);
    std::vector<std::thread> threads;
    for (int rank = 0; rank < world; ++rank) {
      threads.emplace_back([&, rank] {
        RankContext& ctx = *contexts[rank];
        pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
        o.rank = rank;
        o.size = world;
        o.backend = backend.plugin.c_str();
        o.store_url = store.c_str();
        o.timeout_ms = static_cast<int64_t>(scenario.group_timeout_s * 1000);
        pg_group_t group = nullptr;
        const pg_status_t s = pg_group_create(&o, &group);
        if (s != PG_OK) {
          ctx.report.fail(std::string("pg_group_create: ") + pg_status_name(s) + ": " +
                          pg_last_error());
          return;
        }
        run_rank(ctx, scenario, group);
        outcomes[rank].reported = true;
      });
    }
    for (auto& t : threads) t.join();
  }
  for (int rank = 0; rank < world; ++rank) {
    const Report& report = contexts[rank]->report;
    RankOutcome& o = outcomes[rank];
    o.rank = rank;
    o.checks = report.checks();
    o.failures = report.failures();
    o.summary = report.summary();
    o.tally = report.tally();
    o.problems = report.messages();
    if (report.failures() > static_cast<int>(report.messages().size()))
      o.problems.push_back("... and " +
                           std::to_string(report.failures() - report.messages().size()) +
                           " more failures");
  }
  return outcomes;
}

}  // namespace pgtest
