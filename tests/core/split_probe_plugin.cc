// The split probe plugin (see split_probe.h): loopback (PG_SPLIT_PROBE_INNER) with its
// group_create, group_destroy and group_split wrapped to record what the core passes.
// Built twice: "split_probe" offers group_split; "split_probe_v1" (PG_SPLIT_PROBE_V1) is a
// version-1 table, struct_size PG_BACKEND_OPS_V1_SIZE, whose memory still holds the
// recording group_split beyond that size: a core that read past struct_size would call it.
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "procgroup/procgroup_backend.h"
#include "split_probe.h"

namespace {

#if defined(PG_SPLIT_PROBE_V1) && PG_SPLIT_PROBE_V1
constexpr const char* kName = "split_probe_v1";
constexpr uint32_t kTableSize = PG_BACKEND_OPS_V1_SIZE;
#else
constexpr const char* kName = "split_probe";
constexpr uint32_t kTableSize = sizeof(pg_backend_ops_t);
#endif

const pg_host_services_t* g_host = nullptr;
pg_backend_ops_t g_inner{};  // loopback's table, as far as its struct_size goes

std::mutex g_mu;
std::map<pg_backend_group_t, pgtest_probe_group_t> g_groups;  // handles handed out, live
std::vector<pgtest_split_call_t> g_calls;

template <size_t N>
void copy_text(char (&to)[N], const char* from) {
  std::strncpy(to, from != nullptr ? from : "", N - 1);
  to[N - 1] = '\0';
}

pgtest_probe_group_t group_of(const pg_backend_group_config_t& c) {
  pgtest_probe_group_t g{};
  copy_text(g.id, c.group_id);
  g.rank = c.rank;
  g.size = c.size;
  return g;
}

// Records a call; a group it made becomes known under its handle.
void record(pgtest_split_call_t call, const pg_backend_group_config_t* config,
            pg_backend_group_t made) {
  call.has_config = config != nullptr;
  if (config != nullptr) {
    call.made = group_of(*config);
    call.local_rank = config->local_rank;
    call.local_size = config->local_size;
    call.device_type = config->device_type;
    call.timeout_ms = config->timeout_ms;
    copy_text(call.master_addr, config->master_addr);
    call.has_store = config->store != nullptr;
  }
  call.out_null = made == nullptr;
  std::lock_guard lock(g_mu);
  if (made != nullptr && config != nullptr) g_groups[made] = group_of(*config);
  g_calls.push_back(call);
}

pg_status_t probe_create(const pg_backend_group_config_t* config, pg_backend_group_t* out) {
  pgtest_split_call_t call{};
  call.entry = 'c';
  call.status = g_inner.group_create(config, out);
  record(call, config, call.status == PG_OK ? *out : nullptr);
  return call.status;
}

pg_status_t probe_split(pg_backend_group_t parent, int32_t color, int32_t key,
                        const pg_backend_group_config_t* config, pg_backend_group_t* out) {
  pgtest_split_call_t call{};
  call.entry = 's';
  call.color = color;
  call.key = key;
  {
    std::lock_guard lock(g_mu);
    auto it = g_groups.find(parent);
    if (it != g_groups.end()) call.parent = it->second;
  }
  const bool has_entry = g_inner.struct_size >= PG_BACKEND_OPS_SPLIT_SIZE && g_inner.group_split;
  if (key == PGTEST_SPLIT_PROBE_REFUSE_KEY || !has_entry) {
    g_host->set_error(g_host->ctx, "split probe: refused");
    call.status = PG_ERR_BACKEND;
  } else {
    call.status = g_inner.group_split(parent, color, key, config, out);
  }
  record(call, config, call.status == PG_OK && out != nullptr ? *out : nullptr);
  return call.status;
}

pg_status_t probe_destroy(pg_backend_group_t group) {
  {
    std::lock_guard lock(g_mu);
    g_groups.erase(group);
  }
  return g_inner.group_destroy(group);
}

pg_backend_ops_t g_table{};

}  // namespace

extern "C" PG_BACKEND_EXPORT size_t pgtest_split_probe_take(pgtest_split_call_t* out,
                                                            size_t capacity) {
  std::lock_guard lock(g_mu);
  const size_t n = g_calls.size();
  std::copy_n(g_calls.begin(), std::min(n, capacity), out);
  g_calls.clear();
  return n;
}

extern "C" PG_BACKEND_EXPORT pg_status_t pg_backend_negotiate(const pg_backend_negotiate_in_t* in,
                                                              pg_backend_negotiate_out_t* out) {
  if (in == nullptr || out == nullptr || in->host == nullptr) return PG_ERR_INVALID_ARGUMENT;
  g_host = in->host;
  void* handle = dlopen(PG_SPLIT_PROBE_INNER, RTLD_NOW | RTLD_LOCAL);  // kept open
  auto* negotiate =
      handle != nullptr
          ? reinterpret_cast<pg_backend_negotiate_fn>(dlsym(handle, PG_BACKEND_NEGOTIATE_SYMBOL))
          : nullptr;
  if (negotiate == nullptr) {
    g_host->set_error(g_host->ctx, "split probe: cannot load " PG_SPLIT_PROBE_INNER);
    return PG_ERR_BACKEND_NOT_FOUND;
  }
  if (pg_status_t s = negotiate(in, out); s != PG_OK) return s;
  std::memcpy(&g_inner, out->ops, std::min<size_t>(out->ops->struct_size, sizeof(g_inner)));
  g_table = g_inner;
  g_table.struct_size = kTableSize;
  g_table.group_create = probe_create;
  g_table.group_destroy = probe_destroy;
  g_table.group_split = probe_split;  // beyond struct_size in the v1 variant
  out->name = kName;
  out->ops = &g_table;
  return PG_OK;
}
