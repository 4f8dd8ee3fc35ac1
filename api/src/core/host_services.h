// What the core hands to plugins: the process-wide host services (log, error message,
// reduction kernels) and, per group, a pg_host_store_t view of the rendezvous store.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "procgroup/procgroup_backend.h"
#include "store/store.h"

namespace procgroup::detail {

// Static, immutable; valid for the life of the process.
const pg_host_services_t* host_services();

// The store a backend group sees: C callbacks over a (prefixed) Store. get() with a
// negative timeout uses default_timeout.
class HostStore {
 public:
  HostStore(std::shared_ptr<Store> store, Millis default_timeout);
  HostStore(const HostStore&) = delete;
  HostStore& operator=(const HostStore&) = delete;

  const pg_host_store_t* c_store() const { return &c_store_; }
  Store& store() { return *store_; }
  Millis default_timeout() const { return default_timeout_; }
  // The store's own message for the last call that failed with PG_ERR_STORE or PG_ERR_AUTH
  // (it names host:port and why); a plugin reporting the failure in its own words loses it.
  void remember_failure(pg_status_t code, std::string_view message);
  std::string last_failure() const;

 private:
  std::shared_ptr<Store> store_;
  Millis default_timeout_;
  pg_host_store_t c_store_;
  mutable std::mutex mutex_;
  std::string last_failure_;
};

// The message a backend left with set_error (or a generic one naming the entry), as a
// Status with the backend's code.
Status backend_failure(pg_status_t code, std::string_view backend, std::string_view entry);
// PG_ERR_BACKEND naming the backend, the code it should not have returned, and the entry.
Status unexpected_plugin_status(pg_status_t code, std::string_view backend,
                                std::string_view entry);

}  // namespace procgroup::detail
