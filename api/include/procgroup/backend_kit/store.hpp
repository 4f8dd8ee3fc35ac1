// backend_kit/store.hpp — the host store (pg_host_store_t, already scoped to the group) as
// a plugin uses it: values as std::string, the host's memory given back, and failures as a
// kit::Status with the host's code and a message naming the call and the key.
//
//   const kit::Store store(config.store);
//   PG_KIT_TRY(store.set("mine/address/" + std::to_string(rank), address));
//   std::string theirs;
//   kit::Status st = store.get("mine/address/0", config.timeout_ms, &theirs);
//   if (st.code == PG_ERR_TIMEOUT) ...;  // the key never appeared: the peer's fault, not the
//                                        // store's (a plugin may say so in its own words)
#ifndef PROCGROUP_BACKEND_KIT_STORE_HPP_
#define PROCGROUP_BACKEND_KIT_STORE_HPP_

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "procgroup/backend_kit/status.hpp"
#include "procgroup/procgroup_backend.h"

namespace procgroup::kit {

// What a store call's failure means, for messages: "timed out", "store authentication
// failed", ... (the store lives on rank 0, so an unreachable one points there).
inline std::string store_problem(pg_status_t status) {
  switch (status) {
    case PG_ERR_TIMEOUT: return "timed out";
    case PG_ERR_STORE: return "store unreachable or bad reply (rank 0 hosts it: is it alive?)";
    case PG_ERR_AUTH: return "store authentication failed";
    case PG_ERR_OUT_OF_MEMORY: return "out of memory";
    default: return "store error " + std::to_string(status);
  }
}

class Store {
 public:
  // store must outlive this view of it.
  explicit Store(const pg_host_store_t* store) : store_(store) {}

  Status set(const std::string& key, std::string_view value) const {
    const pg_status_t st = store_->set(store_->ctx, key.c_str(), value.data(), value.size());
    if (st == PG_OK) return {};
    return Status::error(st, "store set of '" + key + "' failed: " + store_problem(st));
  }

  // The value at key once it is there, waiting up to wait_ms (0: only a look);
  // PG_ERR_TIMEOUT when it did not appear in time.
  Status get(const std::string& key, int64_t wait_ms, std::string* value) const {
    void* data = nullptr;
    uint64_t length = 0;
    const pg_status_t st =
        store_->get(store_->ctx, key.c_str(), std::max<int64_t>(wait_ms, 0), &data, &length);
    if (st == PG_OK && data != nullptr) {
      value->assign(static_cast<const char*>(data), length);
    } else if (st == PG_OK) {
      value->clear();
    }
    if (data != nullptr) store_->free_value(store_->ctx, data);
    if (st == PG_OK) return {};
    return Status::error(st, "store get of '" + key + "' (waiting up to " +
                                 std::to_string(wait_ms) + " ms) failed: " + store_problem(st));
  }

  // Whether key is there now (no wait); a failure other than its absence is returned.
  Status exists(const std::string& key, bool* found) const {
    std::string ignored;
    const Status st = get(key, 0, &ignored);
    *found = st.ok();
    return st.code == PG_ERR_TIMEOUT ? Status{} : st;
  }

  // Adds delta to the counter at key; *result gets its new value.
  Status add(const std::string& key, int64_t delta, int64_t* result) const {
    const pg_status_t st = store_->add(store_->ctx, key.c_str(), delta, result);
    if (st == PG_OK) return {};
    return Status::error(st, "store add to '" + key + "' failed: " + store_problem(st));
  }

  // Best effort (a key left behind only costs the store memory): the host's status, or
  // PG_ERR_UNSUPPORTED from a store without remove.
  pg_status_t remove(const std::string& key) const {
    return store_->remove != nullptr ? store_->remove(store_->ctx, key.c_str())
                                     : PG_ERR_UNSUPPORTED;
  }

 private:
  const pg_host_store_t* store_;
};

}  // namespace procgroup::kit

#endif  // PROCGROUP_BACKEND_KIT_STORE_HPP_
