// Rendezvous: how the ranks of a group (threads) find the state rank 0 created, through
// the group's store and the process-wide registry (the plugin's only global).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "loopback_group.h"

namespace procgroup::loopback {
namespace {

// Rank 0 publishes "<pid>:<instance>" under this key of the group's store.
constexpr const char* kInstanceKey = "loopback/instance";

// The plugin's only global: groups by instance id, so ranks (threads) can find the state
// rank 0 created.
struct PluginState {
  std::mutex mu;
  std::map<uint64_t, std::shared_ptr<SharedGroup>> groups;
  uint64_t next_instance = 1;
};

PluginState& plugin_state() {
  static PluginState state;
  return state;
}

void unregister(uint64_t instance) {
  PluginState& state = plugin_state();
  std::lock_guard lock(state.mu);
  state.groups.erase(instance);
}

// Rank 0's side of the rendezvous: a new SharedGroup, registered and published.
Status publish(const pg_backend_group_config_t& config, std::shared_ptr<SharedGroup>* out) {
  PluginState& state = plugin_state();
  {
    std::lock_guard lock(state.mu);
    uint64_t instance = state.next_instance++;
    *out = std::make_shared<SharedGroup>(config.group_id, config.size, instance);
    state.groups.emplace(instance, *out);
  }
  std::string value = std::to_string(getpid()) + ":" + std::to_string((*out)->instance);
  if (const pg_status_t st = kit::Store(config.store).set(kInstanceKey, value).code; st != PG_OK) {
    unregister((*out)->instance);
    return {st == PG_ERR_TIMEOUT ? st : PG_ERR_STORE,
            "loopback group '" + std::string(config.group_id) +
                "': rank 0 could not publish its instance in the store"};
  }
  return {};
}

// Other ranks: read rank 0's instance from the store and find it in the registry.
Status lookup(const pg_backend_group_config_t& config, std::shared_ptr<SharedGroup>* out) {
  const std::string where =
      "loopback group '" + std::string(config.group_id) + "' rank " + std::to_string(config.rank);
  std::string text;
  if (const pg_status_t st =
          kit::Store(config.store).get(kInstanceKey, config.timeout_ms, &text).code;
      st != PG_OK) {
    if (st == PG_ERR_TIMEOUT) {
      return {st, where + ": rank 0 did not publish the group within " +
                      std::to_string(config.timeout_ms) + " ms"};
    }
    return {st, where + ": reading rank 0's instance from the store failed"};
  }
  long long pid = 0;
  unsigned long long instance = 0;
  if (std::sscanf(text.c_str(), "%lld:%llu", &pid, &instance) != 2) {
    return {PG_ERR_STORE, where + ": malformed instance '" + text + "' in the store"};
  }
  if (pid != static_cast<long long>(getpid())) {
    return {PG_ERR_UNSUPPORTED, where + ": rank 0 runs in process " + std::to_string(pid) +
                                    ", this rank in " + std::to_string(getpid()) +
                                    "; loopback ranks must be threads of one process; use gloo "
                                    "or ucx for processes"};
  }
  PluginState& state = plugin_state();
  std::lock_guard lock(state.mu);
  auto it = state.groups.find(instance);
  if (it == state.groups.end()) {
    return {PG_ERR_PEER_LOST, where + ": rank 0's instance " + text +
                                  " no longer exists (rank 0 gave up or left the group)"};
  }
  if (it->second->group_id != config.group_id || it->second->size != config.size) {
    return {PG_ERR_MISMATCH, where + " of size " + std::to_string(config.size) +
                                 " found instance '" + it->second->group_id + "' of size " +
                                 std::to_string(it->second->size)};
  }
  *out = it->second;
  return {};
}

}  // namespace

// ---- RankGroup: joining and leaving -----------------------------------------------

Status RankGroup::create(const pg_backend_group_config_t& config, const pg_host_services_t* host,
                         std::unique_ptr<RankGroup>* out) {
  std::shared_ptr<SharedGroup> shared;
  PG_KIT_TRY(config.rank == 0 ? publish(config, &shared) : lookup(config, &shared));
  SharedGroup& g = *shared;
  const int rank = config.rank;
  const std::string who = "loopback group '" + g.group_id + "': rank " + std::to_string(rank);
  std::unique_lock lock(g.mu);
  if (g.abandoned) return {PG_ERR_PEER_LOST, who + " arrived after the rendezvous gave up"};
  if (g.slots[rank].joined) return {PG_ERR_INVALID_ARGUMENT, who + " joined twice"};
  g.slots[rank].joined = true;
  ++g.alive;
  g.cv.notify_all();
  // Every rank waits for all, so no operation can start before the group is complete.
  auto all_here = [&] { return g.abandoned || std::ranges::all_of(g.slots, &Slot::joined); };
  const bool complete = kit::wait_until(g.cv, lock, deadline_after(config.timeout_ms), all_here);
  if (!complete || g.abandoned) {
    const std::string missing = rank_list(g.size, [&](int r) { return !g.slots[r].joined; });
    g.abandoned = true;
    g.cv.notify_all();
    bool last = --g.alive == 0;
    lock.unlock();
    if (last) unregister(g.instance);
    // A retry under the same store scope must not find this dead instance.
    if (rank == 0) kit::Store(config.store).remove(kInstanceKey);
    return {PG_ERR_TIMEOUT, "loopback group '" + g.group_id + "' rendezvous timed out after " +
                                std::to_string(config.timeout_ms) + " ms on rank " +
                                std::to_string(rank) + "; not heard from rank(s) " + missing};
  }
  // The key is no longer needed; removing it keeps a later group under the same store
  // scope from finding this instance.
  if (rank == g.size - 1) kit::Store(config.store).remove(kInstanceKey);
  lock.unlock();
  return launch(std::move(shared), rank, config.timeout_ms, host, out);
}

Status RankGroup::launch(std::shared_ptr<SharedGroup> shared, int rank, int64_t timeout_ms,
                         const pg_host_services_t* host, std::unique_ptr<RankGroup>* out) {
  SharedGroup& g = *shared;
  std::unique_ptr<RankGroup> handle(new RankGroup(std::move(shared), rank, timeout_ms, host));
  try {
    handle->worker_ = std::thread([h = handle.get()] { h->worker_main(); });
  } catch (...) {
    {
      std::lock_guard lock(g.mu);
      g.fail_locked(PG_ERR_BACKEND, "rank " + std::to_string(rank) + " could not start its worker",
                    0);
    }
    handle->leave();
    return {PG_ERR_BACKEND, "loopback: could not start a worker thread"};
  }
  *out = std::move(handle);
  return {};
}

void RankGroup::leave() {
  SharedGroup& g = *shared_;
  bool last = false;
  {
    std::lock_guard lock(g.mu);
    last = --g.alive == 0;
  }
  if (last) unregister(g.instance);
}

}  // namespace procgroup::loopback
