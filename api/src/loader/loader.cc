#include "loader/loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include <fmt/ranges.h>

#include "common/log.h"
#include "loader/dl_library.h"
#include "loader/negotiate_check.h"

namespace procgroup::detail {
namespace {

constexpr std::string_view kLogComponent = "loader";

// The process-wide registry of loaded plugins: the one piece of mutable global state the
// design allows. Keyed by canonical path so that two names (or a name and a path, or a
// symlink) for one file share one Plugin and one negotiation.
struct Registry {
  std::mutex mutex;  // guards plugins; taken by loads and by the last PluginRef's deleter
  std::map<std::string, std::weak_ptr<const Plugin>> plugins;
  // Serialises whole loads (dlopen + negotiate + insert), so a file is negotiated once per
  // life of its Plugin even when threads race to load it. Never taken by the deleter.
  std::mutex load_mutex;
};

Registry& registry() {
  // Leaked on purpose: a PluginRef held by some other static may die after ours would.
  static Registry* const instance = new Registry;
  return *instance;
}

// Runs when the last PluginRef goes: forgets the file (unless a newer load already took
// its slot) and only then dlcloses it, so nobody can find a Plugin whose code is gone.
struct PluginDeleter {
  void operator()(const Plugin* plugin) const noexcept {
    {
      Registry& r = registry();
      std::lock_guard lock(r.mutex);
      auto it = r.plugins.find(plugin->path);
      if (it != r.plugins.end() && it->second.expired()) r.plugins.erase(it);
    }
    if (plugin->handle != nullptr) dlclose(plugin->handle);
    delete plugin;
  }
};

struct Rejection {
  std::string candidate;
  Status status;
};

bool is_path(std::string_view value) {
  return value.find('/') != std::string_view::npos || value.ends_with(".so");
}

PluginRef find_loaded(const std::string& real_path) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.plugins.find(real_path);
  return it != r.plugins.end() ? it->second.lock() : nullptr;
}

// Calls the plugin's negotiate behind an exception firewall. The plugin explains a failure
// through host->set_error, which sets this thread's last error; it is read back here and
// the caller's own last error is put back afterwards.
Status call_negotiate(pg_backend_negotiate_fn negotiate, const pg_host_services_t* host,
                      pg_backend_negotiate_out_t& out) {
  pg_backend_negotiate_in_t in{};
  in.struct_size = sizeof(in);
  in.min_version = kMinBackendInterface;
  in.max_version = kMaxBackendInterface;
  in.host = host;
  out = pg_backend_negotiate_out_t{};
  out.struct_size = sizeof(out);

  const std::string saved_error = last_error();
  set_last_error("");
  pg_status_t code = PG_OK;
  Status failure;
  try {
    code = negotiate(&in, &out);
  } catch (const std::exception& e) {
    failure = make_error(PG_ERR_BACKEND, "pg_backend_negotiate threw an exception: {}", e.what());
  } catch (...) {
    failure = make_error(PG_ERR_BACKEND, "pg_backend_negotiate threw a non-standard exception");
  }
  std::string message = last_error();
  set_last_error(saved_error);
  if (!failure.ok()) return failure;
  if (code == PG_OK) return ok_status();

  if (message.empty()) message = "(the plugin gave no message)";
  if (code == PG_ERR_ABI_MISMATCH) {
    return make_error(PG_ERR_ABI_MISMATCH,
                      "pg_backend_negotiate refused the interface versions {}..{} offered "
                      "(PG_ERR_ABI_MISMATCH): {}",
                      kMinBackendInterface, kMaxBackendInterface, message);
  }
  return make_error(PG_ERR_BACKEND, "pg_backend_negotiate failed with {}: {}", status_name(code),
                    message);
}

// Loads one candidate file, or says why it is not a usable plugin.
Result<PluginRef> load_file(const std::string& candidate, const pg_host_services_t* host) {
  PG_ASSIGN_OR_RETURN(std::string real_path, canonical_file_path(candidate));
  if (PluginRef loaded = find_loaded(real_path)) return loaded;

  PG_ASSIGN_OR_RETURN(DlLibrary library, DlLibrary::open(real_path));
  void* symbol = library.symbol(PG_BACKEND_NEGOTIATE_SYMBOL);
  if (symbol == nullptr) {
    return make_error(PG_ERR_BACKEND_NOT_FOUND, "not a procgroup backend: no exported {} ({})",
                      PG_BACKEND_NEGOTIATE_SYMBOL, library.error());
  }
  // POSIX guarantees dlsym's object pointer converts to the function it names.
  auto negotiate = reinterpret_cast<pg_backend_negotiate_fn>(symbol);
  pg_backend_negotiate_out_t out{};
  PG_RETURN_IF_ERROR(call_negotiate(negotiate, host, out));
  PG_ASSIGN_OR_RETURN(NegotiatedBackend negotiated,
                      check_negotiation(out, kMinBackendInterface, kMaxBackendInterface));
  for (const std::string& warning : negotiated.warnings) {
    log(kLogWarn, kLogComponent, "{} (backend '{}'): {}", real_path, negotiated.name, warning);
  }

  auto owned = std::make_unique<Plugin>();
  owned->name = std::move(negotiated.name);
  owned->path = real_path;
  owned->description = std::move(negotiated.description);
  owned->version = negotiated.version;
  owned->native_ops = negotiated.native_ops;
  owned->native_dtypes = negotiated.native_dtypes;
  owned->native_reduce_ops = negotiated.native_reduce_ops;
  owned->devices = negotiated.devices;
  owned->ops = negotiated.ops;
  owned->group_split = negotiated.group_split;
  owned->work_on_complete = negotiated.work_on_complete;
  owned->handle = library.release();
  // If the control block cannot be allocated, shared_ptr runs the deleter itself, so the
  // handle is closed exactly once on every path.
  PluginRef plugin(owned.release(), PluginDeleter{});

  Registry& r = registry();
  std::lock_guard lock(r.mutex);  // released before plugin, should insertion throw
  r.plugins[real_path] = plugin;
  return plugin;
}

std::string join_rejections(const std::vector<Rejection>& rejections) {
  std::string text;
  for (const Rejection& r : rejections) {
    if (!text.empty()) text += ", ";
    text += fmt::format("{} ({})", r.candidate, r.status.message());
  }
  return text;
}

Status load_failure(std::string_view value, bool by_name,
                    const std::vector<Rejection>& rejections) {
  if (!by_name && rejections.size() == 1) {  // a path: one file, one reason
    const Status& why = rejections.front().status;
    if (why.code() != PG_ERR_BACKEND_NOT_FOUND) {
      return make_error(why.code(), "backend '{}' could not be loaded: {}", value, why.message());
    }
    return make_error(why.code(),
                      "backend '{}' not found: {} (a path is loaded as given; "
                      "PROCGROUP_PLUGIN_PATH applies to names only)",
                      value, why.message());
  }
  // A file that exists but is wrong says more than one that is missing: report the first
  // such reason's code, NOT_FOUND only when every candidate was absent or not a plugin.
  pg_status_t code = PG_ERR_BACKEND_NOT_FOUND;
  for (const Rejection& r : rejections) {
    if (r.status.code() != PG_ERR_BACKEND_NOT_FOUND) {
      code = r.status.code();
      break;
    }
  }
  const std::string tried = rejections.empty() ? "no candidate (no search directory is known)"
                                               : join_rejections(rejections);
  if (code != PG_ERR_BACKEND_NOT_FOUND) {
    return make_error(code, "backend '{}' could not be loaded; tried: {}", value, tried);
  }
  const char* search_path = std::getenv("PROCGROUP_PLUGIN_PATH");
  const std::vector<std::string> available = available_backends();
  return make_error(code,
                    "backend '{}' not found; available: {}; tried: {}. PROCGROUP_PLUGIN_PATH is "
                    "{}; add the directory holding libprocgroup-{}.so to it",
                    value, available.empty() ? "none" : fmt::to_string(fmt::join(available, ", ")),
                    tried, search_path != nullptr ? fmt::format("'{}'", search_path) : "unset",
                    value);
}

// Never called; only its address matters, to find the file the loader lives in.
void loader_anchor() {}

// procgroup/ beside libprocgroup.so: the build tree mirrors the install tree, so this finds
// the bundled backends in both without configuration. Empty if that file is unknown.
std::string bundled_plugin_dir() {
  const std::string self = file_containing(reinterpret_cast<const void*>(&loader_anchor));
  const size_t slash = self.rfind('/');
  return slash == std::string::npos ? std::string() : self.substr(0, slash) + "/procgroup";
}

}  // namespace

std::vector<std::string> plugin_search_dirs() {
  std::vector<std::string> dirs;
  if (const char* search_path = std::getenv("PROCGROUP_PLUGIN_PATH")) {
    std::string_view rest(search_path);
    while (!rest.empty()) {
      const size_t colon = rest.find(':');
      std::string_view dir = rest.substr(0, colon);
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
      if (dir.empty()) continue;  // "a::b" or a trailing ':' must not mean the cwd
      if (dir.size() > 1 && dir.ends_with('/')) dir.remove_suffix(1);
      dirs.emplace_back(dir);
    }
  }
  if (std::string bundled = bundled_plugin_dir(); !bundled.empty()) dirs.push_back(bundled);
  return dirs;
}

std::vector<std::string> plugin_candidates(std::string_view name) {
  std::vector<std::string> candidates;
  for (const std::string& dir : plugin_search_dirs())
    candidates.push_back(fmt::format("{}{}libprocgroup-{}.so", dir, dir == "/" ? "" : "/", name));
  return candidates;
}

std::vector<std::string> available_backends() {
  constexpr std::string_view kPrefix = "libprocgroup-", kSuffix = ".so";
  std::set<std::string> names;
  for (const std::string& dir : plugin_search_dirs()) {
    std::error_code error;  // an unreadable or missing directory simply offers nothing
    for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
      const std::string file = entry.path().filename().string();
      if (!file.starts_with(kPrefix) || !file.ends_with(kSuffix)) continue;
      std::string name = file.substr(kPrefix.size(), file.size() - kPrefix.size() - kSuffix.size());
      if (is_valid_backend_name(name)) names.insert(std::move(name));
    }
  }
  return {names.begin(), names.end()};
}

Result<PluginRef> load_backend(std::string_view name_or_path, const pg_host_services_t* host) {
  if (host == nullptr) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "loading backend '{}': no host services",
                      printable(name_or_path));
  }
  const bool by_name = !is_path(name_or_path);
  std::vector<std::string> candidates;
  if (by_name) {
    if (!is_valid_backend_name(name_or_path)) {
      return make_error(PG_ERR_INVALID_ARGUMENT,
                        "backend '{}' is neither a name ([a-z0-9_]+, at most {} characters) "
                        "nor a path (containing '/' or ending in .so)",
                        printable(name_or_path), kMaxBackendNameLength);
    }
    candidates = plugin_candidates(name_or_path);
  } else {
    candidates.emplace_back(name_or_path);
  }

  std::lock_guard load_lock(registry().load_mutex);
  std::vector<Rejection> rejections;
  for (const std::string& candidate : candidates) {
    Result<PluginRef> loaded = load_file(candidate, host);
    if (!loaded.ok()) {
      rejections.push_back({candidate, loaded.status()});
      continue;
    }
    const Plugin& plugin = **loaded;
    for (const Rejection& r : rejections) {
      log(kLogInfo, kLogComponent, "skipped {}: {}", r.candidate, r.status.message());
    }
    if (by_name && plugin.name != name_or_path) {
      log(kLogWarn, kLogComponent, "{} was found as '{}' but calls itself '{}'", plugin.path,
          name_or_path, plugin.name);
    }
    log(kLogInfo, kLogComponent, "backend '{}' (interface {}{}{}) loaded from {}", plugin.name,
        plugin.version, plugin.description.empty() ? "" : ", ", plugin.description, plugin.path);
    // A PROCGROUP_PLUGIN_PATH file of a bundled name wins, as LD_LIBRARY_PATH would: say so.
    const std::string bundled =
        fmt::format("{}/libprocgroup-{}.so", bundled_plugin_dir(), name_or_path);
    if (by_name && candidate != bundled && std::filesystem::exists(bundled))
      log(kLogInfo, kLogComponent, "{} (from PROCGROUP_PLUGIN_PATH) is used ahead of {}",
          candidate, bundled);
    return loaded;
  }

  Status failure = load_failure(printable(name_or_path), by_name, rejections);
  for (const Rejection& r : rejections) {
    log(kLogWarn, kLogComponent, "rejected {}: {}", r.candidate, r.status.message());
  }
  return failure;
}

}  // namespace procgroup::detail
