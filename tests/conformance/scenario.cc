#include "scenario.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

namespace pgtest {

void Tally::add(pg_op_t op, pg_dtype_t dtype, Route route, bool ok) {
  if (op == PG_OP_RECV) op = PG_OP_SEND;
  if (op < 0 || op >= kOps || dtype < 0 || dtype >= kDtypes) return;
  ++(ok ? passed : failed)[op][dtype][static_cast<int>(route)];
}

void Tally::merge(const Tally& other) {
  for (int o = 0; o < kOps; ++o)
    for (int d = 0; d < kDtypes; ++d)
      for (int r = 0; r < kRoutes; ++r) {
        passed[o][d][r] += other.passed[o][d][r];
        failed[o][d][r] += other.failed[o][d][r];
      }
  if (!has_caps && other.has_caps) set_caps(other.caps);
}

std::vector<std::string> Tally::lines() const {
  std::vector<std::string> out;
  if (has_caps) {
    char line[128];
    std::snprintf(line, sizeof(line), "pgconf-caps %x %x %x %x", caps.native_ops,
                  caps.native_dtypes, caps.native_reduce_ops, caps.devices);
    out.emplace_back(line);
  }
  for (int o = 0; o < kOps; ++o)
    for (int d = 0; d < kDtypes; ++d)
      for (int r = 0; r < kRoutes; ++r)
        if (passed[o][d][r] != 0 || failed[o][d][r] != 0)
          out.push_back("pgconf-tally " + std::to_string(o) + " " + std::to_string(d) + " " +
                        std::to_string(r) + " " + std::to_string(passed[o][d][r]) + " " +
                        std::to_string(failed[o][d][r]));
  return out;
}

bool Tally::parse_line(std::string_view line) {
  const std::string text(line);
  unsigned ops = 0, dtypes = 0, redops = 0, devices = 0;
  if (std::sscanf(text.c_str(), "pgconf-caps %x %x %x %x", &ops, &dtypes, &redops, &devices) == 4) {
    pg_capabilities_t c = PG_CAPABILITIES_INIT;
    c.native_ops = ops;
    c.native_dtypes = dtypes;
    c.native_reduce_ops = redops;
    c.devices = devices;
    set_caps(c);
    return true;
  }
  int o = 0, d = 0, r = 0, p = 0, f = 0;
  if (std::sscanf(text.c_str(), "pgconf-tally %d %d %d %d %d", &o, &d, &r, &p, &f) != 5)
    return false;
  if (o >= 0 && o < kOps && d >= 0 && d < kDtypes && r >= 0 && r < kRoutes) {
    passed[o][d][r] += p;
    failed[o][d][r] += f;
  }
  return true;
}

void Report::fail(const std::string& message) {
  ++checks_;
  if (failures_++ < static_cast<int>(kKeptMessages)) {
    std::string line = message;
    for (char& ch : line)
      if (ch == '\n' || ch == '\r') ch = ' ';  // one failure, one line
    if (echo_) {
      std::fprintf(echo_, "pgconf-fail %s\n", line.c_str());
      std::fflush(echo_);
    }
    messages_.push_back(std::move(line));
  }
}

void Report::step(const std::string& what) {
  if (echo_ == nullptr) return;
  std::fprintf(echo_, "pgconf-step %s\n", what.c_str());
  std::fflush(echo_);
}

void Report::counted(Route route) {
  ++checks_;
  ++by_route_[static_cast<int>(route)];
}

void Report::run(pg_group_t group, int rank, int size, const pg_capabilities_t& caps,
                 const CollectiveCase& c) {
  step(c.to_string());
  std::string error = run_case(group, rank, size, caps, c);
  const Route route = route_for(caps, c.op, c.dtype, c.redop);
  tally(c.op, c.dtype, route, error.empty());
  if (!error.empty()) {
    fail(error);
    return;
  }
  ++by_route_[static_cast<int>(route)];
  ++checks_;
}

std::string Report::summary() const {
  static constexpr const char* kRoutes[] = {"native", "native sum + core scaling",
                                            "emulated by the core", "refused as unsupported"};
  std::string cases;
  for (int i = 0; i < 4; ++i) {
    if (by_route_[i] == 0) continue;
    cases += (cases.empty() ? "; cases: " : ", ") + std::to_string(by_route_[i]) + " " + kRoutes[i];
  }
  return std::to_string(checks_) + " checks, " + std::to_string(failures_) + " failures" + cases;
}

std::string Report::done_line() const {
  return "pgconf-done checks=" + std::to_string(checks_) +
         " failures=" + std::to_string(failures_) + " | " + summary();
}

bool Report::parse_done_line(std::string_view line, int* checks, int* failures,
                             std::string* summary) {
  const std::string_view prefix = "pgconf-done ";
  if (line.substr(0, prefix.size()) != prefix) return false;
  const std::string text(line);
  if (std::sscanf(text.c_str(), "pgconf-done checks=%d failures=%d", checks, failures) != 2)
    return false;
  const size_t bar = text.find(" | ");
  *summary = bar == std::string::npos ? "" : text.substr(bar + 3);
  return true;
}

const std::vector<Scenario>& all_scenarios() {
  static const std::vector<Scenario> scenarios = [] {  // immutable once built
    std::vector<Scenario> out;
    add_collective_scenarios(out);
    add_p2p_scenarios(out);
    add_group_scenarios(out);
    add_lifecycle_scenarios(out);
    return out;
  }();
  return scenarios;
}

const Scenario* find_scenario(std::string_view name) {
  for (const Scenario& s : all_scenarios())
    if (name == s.name) return &s;
  return nullptr;
}

std::vector<std::unique_ptr<PendingCheck>> start_mixed_cases(RankContext& ctx, int first,
                                                             int count) {
  const std::vector<pg_op_t> ops = all_collectives();
  const std::vector<pg_dtype_t> dtypes = all_dtypes();
  const std::vector<pg_reduce_op_t> redops = all_reduce_ops();
  std::vector<std::unique_ptr<PendingCheck>> pending;
  for (int k = first; k < first + count; ++k) {
    const InPlace form = k % 3 == 0   ? InPlace::kNo
                         : k % 3 == 1 ? InPlace::kNullInput
                                      : InPlace::kAliased;
    const CollectiveCase c{ops[k % ops.size()],
                           dtypes[(3 * k) % dtypes.size()],
                           redops[k % redops.size()],
                           static_cast<uint64_t>(1 + 97 * k),
                           k % ctx.size,
                           form,
                           Pattern::kExact,
                           static_cast<uint32_t>(2000 + k)};
    std::string error;
    pending.push_back(start_case(ctx.group, ctx.rank, ctx.size, ctx.caps, c, &error));
    if (!error.empty() || pending.back() == nullptr)  // failed, or refused as unsupported
      ctx.report.tally(c.op, c.dtype, route_for(ctx.caps, c.op, c.dtype, c.redop), error.empty());
    if (!error.empty()) ctx.report.fail(error);
  }
  return pending;
}

void finish_case(RankContext& ctx, PendingCheck* check) {
  if (check == nullptr) return;
  ctx.report.step("waiting for " + check->which().to_string());
  const pg_status_t s = pg_work_wait(check->work(), -1);
  const std::string who = "rank " + std::to_string(ctx.rank) + ": ";
  std::string bad =
      s == PG_OK ? check->verify() : who + "wait: " + pg_status_name(s) + ": " + pg_last_error();
  if (s == PG_OK && bad.empty() && pg_work_test(check->work()) != PG_OK)
    bad = who + "pg_work_test after a successful wait is not PG_OK";
  check->release_work();
  ctx.report.tally(check->which().op, check->which().dtype, check->route(), bad.empty());
  if (!bad.empty()) {
    ctx.report.fail(bad + " in " + check->which().to_string() + " [" + route_name(check->route()) +
                    "]");
    return;
  }
  ctx.report.counted(check->route());
}

void touch_file(const std::string& path) { std::ofstream(path) << "x"; }

bool wait_for_file(const std::string& path, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!std::filesystem::exists(path)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace pgtest
