#include "core/store_registry.h"

#include <map>
#include <mutex>
#include <vector>

#include "fmt/format.h"
#include "store/open_store.h"

namespace procgroup::detail {
namespace {

struct Entry {
  std::weak_ptr<Store> shared;  // alive while a group uses it (or kept until exit)
  std::map<std::string, int> names_created;
};

struct Registry {
  std::mutex mutex;
  std::map<std::string, Entry> entries;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: see keep_until_exit()
  return *r;
}

// Destroyed at exit, before anything constructed ahead of the first store: the server's
// thread is joined while the logger it uses still exists.
struct KeptStores {
  std::vector<std::shared_ptr<Store>> stores;
  std::mutex mutex;
  ~KeptStores() {
    std::lock_guard lock(mutex);
    stores.clear();
  }
};

void keep_until_exit(std::shared_ptr<Store> store) {
  static KeptStores kept;
  std::lock_guard lock(kept.mutex);
  kept.stores.push_back(std::move(store));
}

}  // namespace

Result<GroupStore> open_group_store(const StoreConfig& config, const std::string& group_name) {
  const std::string key =
      fmt::format("{}|{}|{}|{}", config.url, config.rank, config.world_size, config.token);
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  Entry& entry = r.entries[key];
  // Counted before opening: a rank whose open fails still took part in the attempt.
  const int nth = ++entry.names_created[group_name];
  GroupStore out;
  out.group_id = nth == 1 ? group_name : fmt::format("{}#{}", group_name, nth);
  out.store = entry.shared.lock();
  if (out.store) return out;
  PG_ASSIGN_OR_RETURN(out.store, open_store(config));
  entry.shared = out.store;
  if (config.rank == 0 && config.url.rfind("tcp://", 0) == 0) keep_until_exit(out.store);
  return out;
}

}  // namespace procgroup::detail
