// Per-call overhead of libprocgroup: the same small allreduce issued through the public
// C ABI (pg_allreduce + pg_work_wait) and straight through the loopback plugin's function
// table (what the core itself calls), in one run, on one rank. The loopback's own thread
// handoff dominates a round trip, so issuing and completing are also timed on their own:
// those differences are the core's validation, dispatch and work tracking.
//
//   core_overhead [batches] [plugin.so]   (default: the loopback plugin)
//
// A plugin that completes a one-rank op inline (ucx) has no thread handoff, so its columns
// are the core's cost alone; the loopback's hand each op to a worker thread.
#include <dlfcn.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "procgroup/procgroup.h"
#include "procgroup/procgroup_backend.h"

namespace {

using Clock = std::chrono::steady_clock;

// Minimal host for the direct path: a map as the store, f32 sum as the only kernel.
struct MiniHost {
  std::mutex mutex;
  std::map<std::string, std::string> kv;
};
MiniHost g_host;

void host_log(void*, int32_t, const char*, const char* m) { std::fprintf(stderr, "%s\n", m); }
void host_set_error(void*, const char* m) { std::fprintf(stderr, "backend error: %s\n", m); }
pg_status_t host_reduce(void*, void* io, const void* in, uint64_t n, pg_dtype_t, pg_reduce_op_t) {
  for (uint64_t i = 0; i < n; ++i) static_cast<float*>(io)[i] += static_cast<const float*>(in)[i];
  return PG_OK;
}
pg_status_t host_scale(void*, void*, uint64_t, pg_dtype_t, uint64_t) { return PG_OK; }
pg_status_t kv_set(void*, const char* k, const void* v, uint64_t n) {
  std::lock_guard lock(g_host.mutex);
  g_host.kv[k] = std::string(static_cast<const char*>(v), n);
  return PG_OK;
}
pg_status_t kv_get(void*, const char* k, int64_t, void** v, uint64_t* n) {
  std::lock_guard lock(g_host.mutex);
  auto it = g_host.kv.find(k);
  if (it == g_host.kv.end()) return PG_ERR_TIMEOUT;
  *v = std::malloc(it->second.size() + 1);
  std::memcpy(*v, it->second.data(), it->second.size());
  *n = it->second.size();
  return PG_OK;
}
void kv_free(void*, void* v) { std::free(v); }
pg_status_t kv_add(void*, const char* k, int64_t d, int64_t* r) {
  std::lock_guard lock(g_host.mutex);
  int64_t v = std::atoll(g_host.kv[k].c_str()) + d;
  g_host.kv[k] = std::to_string(v);
  if (r) *r = v;
  return PG_OK;
}
pg_status_t kv_remove(void*, const char* k) {
  std::lock_guard lock(g_host.mutex);
  g_host.kv.erase(k);
  return PG_OK;
}

// One measured path: issue `batch` operations (timed as "issue"), then wait for and release
// each after all completed (timed as "complete"), then one blocking round trip each.
struct Path {
  std::function<void*()> issue;         // starts one op, returns its work
  std::function<void(void*)> complete;  // waits for and releases a work
};

struct Timing {
  double issue_ns, complete_ns, round_trip_ns;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The two paths alternate, batch after batch, so drift in machine speed hits both alike.
std::pair<Timing, Timing> measure(Path& a, Path& b, int batches, int batch) {
  std::vector<double> issue[2], complete[2], trip[2];
  std::vector<void*> works(batch);
  Path* paths[2] = {&a, &b};
  for (int k = 0; k < batches; ++k) {
    for (int p = 0; p < 2; ++p) {
      auto t0 = Clock::now();
      for (int i = 0; i < batch; ++i) works[i] = paths[p]->issue();
      auto t1 = Clock::now();
      // Let every op finish before timing completion, so only the handle work is measured.
      paths[p]->complete(paths[p]->issue());
      auto t2 = Clock::now();
      for (int i = 0; i < batch; ++i) paths[p]->complete(works[i]);
      auto t3 = Clock::now();
      for (int i = 0; i < 8; ++i) paths[p]->complete(paths[p]->issue());
      auto t4 = Clock::now();
      auto ns = [](auto d) { return std::chrono::duration<double, std::nano>(d).count(); };
      issue[p].push_back(ns(t1 - t0) / batch);
      complete[p].push_back(ns(t3 - t2) / batch);
      trip[p].push_back(ns(t4 - t3) / 8);
    }
  }
  auto timing = [&](int p) {
    return Timing{median(issue[p]), median(complete[p]), median(trip[p])};
  };
  return {timing(0), timing(1)};
}

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "core_overhead: %s: %s\n", what, pg_last_error());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  const int batches = argc > 1 ? std::atoi(argv[1]) : 200;
  const char* plugin = argc > 2 ? argv[2] : PG_LOOPBACK_PATH;
  // One CPU for the whole process (threads inherit it): otherwise whether a backend worker
  // shares the caller's core changes per run and swamps the difference being measured.
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(0, &one);
  const bool pinned = sched_setaffinity(0, sizeof(one), &one) == 0;
  float value = 1.0f;

  // Direct: the plugin's own table.
  void* dl = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    std::fprintf(stderr, "core_overhead: %s\n", dlerror());
    return 1;
  }
  auto negotiate = reinterpret_cast<pg_backend_negotiate_fn>(dlsym(dl, "pg_backend_negotiate"));
  pg_host_services_t host = {sizeof(host),   0,           nullptr,    host_log,
                             host_set_error, host_reduce, host_scale, nullptr};
  pg_host_store_t store = {sizeof(store), 0, nullptr, kv_set, kv_get, kv_free, kv_add, kv_remove};
  pg_backend_negotiate_in_t in = {sizeof(in), 1, 1, 0, &host};
  pg_backend_negotiate_out_t out{};
  out.struct_size = sizeof(out);
  if (!negotiate || negotiate(&in, &out) != PG_OK) die("negotiate");
  pg_backend_group_config_t config{};
  config.struct_size = sizeof(config);
  config.size = 1;
  config.local_size = 1;
  config.device_type = -1;
  config.timeout_ms = 30000;
  config.store = &store;
  config.group_id = "bench";
  config.master_addr = "127.0.0.1";
  pg_backend_group_t bg = nullptr;
  if (out.ops->group_create(&config, &bg) != PG_OK) die("group_create");
  uint64_t seq = 0;
  Path direct{[&]() -> void* {
                pg_backend_op_t op{};
                op.struct_size = sizeof(op);
                op.op = PG_OP_ALLREDUCE;
                op.seq = ++seq;
                op.timeout_ms = 30000;
                op.input = op.output = pg_buffer_cpu(&value, 1, PG_DTYPE_F32);
                op.block_count = 1;  // the plan the core hands over: 1 element, in place
                op.in_place = 1;
                pg_backend_work_t w = nullptr;
                if (out.ops->allreduce(bg, &op, &w) != PG_OK) die("direct allreduce");
                return w;
              },
              [&](void* w) {
                auto work = static_cast<pg_backend_work_t>(w);
                if (out.ops->work_wait(work, 30000) != PG_OK) die("direct wait");
                out.ops->work_release(work);
              }};

  // Through libprocgroup, on the same plugin file.
  pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
  o.size = 1;
  o.backend = plugin;
  pg_group_t group = nullptr;
  if (pg_group_create(&o, &group) != PG_OK) die("pg_group_create");
  pg_buffer_t b = pg_buffer_cpu(&value, 1, PG_DTYPE_F32);
  Path core{[&]() -> void* {
              pg_work_t w = nullptr;
              if (pg_allreduce(group, nullptr, &b, nullptr, &w) != PG_OK) die("pg_allreduce");
              return w;
            },
            [&](void* w) {
              if (pg_work_wait(static_cast<pg_work_t>(w), -1) != PG_OK) die("pg_work_wait");
              pg_work_release(static_cast<pg_work_t>(w));
            }};
  // Blocking (work = NULL), the call a training loop makes: its round trip is the one to
  // compare; its "issue" is the whole call and "complete" has nothing left to do.
  Path blocking{[&]() -> void* {
                  if (pg_allreduce(group, nullptr, &b, nullptr, nullptr) != PG_OK)
                    die("pg_allreduce (blocking)");
                  return nullptr;
                },
                [](void*) {}};
  auto [d, c] = measure(direct, core, batches, 64);
  auto [d2, blocked] = measure(direct, blocking, batches, 64);
  pg_group_destroy(group);
  out.ops->group_destroy(bg);

  std::printf(
      "# 1-element f32 allreduce on %s, 1 rank; median over %d alternating "
      "batches of 64%s\n",
      plugin, batches, pinned ? "; process pinned to CPU 0" : "");
  std::printf("%-34s %14s %14s %14s\n", "path", "issue ns/op", "complete ns/op", "round trip ns");
  std::printf("%-34s %14.0f %14.0f %14.0f\n", "plugin table directly", d.issue_ns, d.complete_ns,
              d.round_trip_ns);
  std::printf("%-34s %14.0f %14.0f %14.0f\n", "libprocgroup (pg_allreduce, wait)", c.issue_ns,
              c.complete_ns, c.round_trip_ns);
  std::printf("%-34s %14.0f %14.0f %14.0f\n", "core overhead", c.issue_ns - d.issue_ns,
              c.complete_ns - d.complete_ns, c.round_trip_ns - d.round_trip_ns);
  std::printf("%-34s %13.2fx %13.2fx %13.2fx\n", "ratio (core / direct)", c.issue_ns / d.issue_ns,
              c.complete_ns / d.complete_ns, c.round_trip_ns / d.round_trip_ns);
  std::printf("%-34s %14s %14s %14.0f\n", "plugin table directly", "", "", d2.round_trip_ns);
  std::printf("%-34s %14s %14s %14.0f\n", "libprocgroup blocking (work NULL)", "", "",
              blocked.round_trip_ns);
  std::printf("%-34s %14s %14s %14.0f\n", "core overhead, blocking", "", "",
              blocked.round_trip_ns - d2.round_trip_ns);
  dlclose(dl);
  return 0;
}
