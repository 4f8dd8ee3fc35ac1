// Finds, loads and validates backend plugins. A name ("gloo") is looked up as
// libprocgroup-<name>.so in each PROCGROUP_PLUGIN_PATH directory, then in procgroup/ beside
// libprocgroup.so; a value containing '/' or ending in ".so" is loaded as a path. Every
// rejected candidate is recorded with its reason (file missing, dlopen error, no
// pg_backend_negotiate, version out of range, table too small, required entry NULL,
// negotiate failed or threw), logged, and listed in the error if nothing loads.
// Loaded plugins are shared and reference-counted: the library is dlclose'd when the
// last PluginRef goes.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "procgroup/procgroup_backend.h"

namespace procgroup::detail {

// Interface versions this core speaks.
inline constexpr uint32_t kMinBackendInterface = 1;
inline constexpr uint32_t kMaxBackendInterface = PG_BACKEND_INTERFACE_VERSION;

struct Plugin {
  std::string name;  // the negotiated name
  std::string path;  // the file loaded
  std::string description;
  uint32_t version = 0;  // the negotiated interface version
  uint32_t native_ops = 0;
  uint32_t native_dtypes = 0;
  uint32_t native_reduce_ops = 0;
  uint32_t devices = 0;
  const pg_backend_ops_t* ops = nullptr;
  // The optional split entry, NULL when the table is too short for it (never read from ops).
  pg_backend_split_fn group_split = nullptr;
  // Likewise the optional work_on_complete entry.
  pg_backend_on_complete_fn work_on_complete = nullptr;
  void* handle = nullptr;  // dlopen handle, owned by the registry
};
using PluginRef = std::shared_ptr<const Plugin>;

// host must outlive every loaded plugin (the core passes a static one). Its set_error must
// set this thread's last error (set_last_error), as pg_last_error() promises: that is how
// the loader reads a failing negotiate's reason. Loads are serialised; thread-safe.
Result<PluginRef> load_backend(std::string_view name_or_path, const pg_host_services_t* host);

// The plugin file names tried for a name, in order (for messages and tests): each
// non-empty PROCGROUP_PLUGIN_PATH entry, then procgroup/ beside the file holding the loader.
std::vector<std::string> plugin_candidates(std::string_view name);

// The directories searched, in order: each non-empty PROCGROUP_PLUGIN_PATH entry, then
// procgroup/ beside libprocgroup.so.
std::vector<std::string> plugin_search_dirs();
// The backend names those directories offer (libprocgroup-<name>.so files), sorted, for the
// message of a name that was not found. Found, not loaded: one may still be rejected.
std::vector<std::string> available_backends();

}  // namespace procgroup::detail
