// gloo_store_adapter.h — gloo's rendezvous Store on top of procgroup's host store.
//
// Gloo exchanges its TCP addresses through a gloo::rendezvous::Store; procgroup hands the
// plugin a pg_host_store_t already scoped to the group. This adapter prefixes every key
// and turns host failures (kit::Store's statuses and messages) into StoreError (a
// gloo::Exception carrying a pg_status_t):
//
//   StoreAdapter store(config->store, "gloo/" + group_id + "/", timeout);
//   context->connectFullMesh(store, device);     // throws StoreError on store failures
#ifndef PROCGROUP_BACKENDS_GLOO_GLOO_STORE_ADAPTER_H_
#define PROCGROUP_BACKENDS_GLOO_GLOO_STORE_ADAPTER_H_

#include <gloo/common/error.h>
#include <gloo/rendezvous/store.h>

#include <chrono>
#include <string>
#include <vector>

#include "procgroup/backend_kit/store.hpp"
#include "procgroup/procgroup_backend.h"

namespace procgroup::gloo_backend {

// A host store failure: status is PG_ERR_TIMEOUT when a key never appeared, else the
// host's status (PG_ERR_STORE, PG_ERR_AUTH, ...).
class StoreError : public gloo::Exception {
 public:
  StoreError(pg_status_t status, const std::string& message)
      : gloo::Exception(message), status_(status) {}
  pg_status_t status() const { return status_; }

 private:
  pg_status_t status_;
};

class StoreAdapter : public gloo::rendezvous::Store {
 public:
  // store must outlive the adapter; timeout bounds every wait that names none.
  StoreAdapter(const pg_host_store_t* store, std::string prefix, std::chrono::milliseconds timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  // Waits (up to the timeout) for the key, like gloo's own stores.
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;
  // get() with its own bound.
  std::vector<char> fetch(const std::string& key, std::chrono::milliseconds timeout);
  // Whether key exists now (no wait).
  bool exists(const std::string& key);
  // Adds delta to the counter at key and returns its new value.
  int64_t add(const std::string& key, int64_t delta);

 private:
  const kit::Store store_;
  const std::string prefix_;
  const std::chrono::milliseconds timeout_;
};

}  // namespace procgroup::gloo_backend

#endif  // PROCGROUP_BACKENDS_GLOO_GLOO_STORE_ADAPTER_H_
