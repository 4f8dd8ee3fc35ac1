// A test-only backend: loads the plugin at PGCONF_MASK_INNER (a path) and declares only
// part of its capabilities, the masks ANDed with PGCONF_MASK_OPS, PGCONF_MASK_DTYPES and
// PGCONF_MASK_REDUCE_OPS (hexadecimal; unset: keep all). The core then emulates the hidden
// rest over the inner plugin's send/recv, so the conformance suite can test the core's
// emulation in real processes on a backend that runs everything natively.
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "procgroup/procgroup_backend.h"

namespace {

uint32_t mask_from_env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? static_cast<uint32_t>(std::strtoul(value, nullptr, 16)) : ~0u;
}

// The inner plugin stays loaded as long as this one: the core uses its function table.
class InnerPlugin {
 public:
  explicit InnerPlugin(const char* path)
      : handle_(path != nullptr ? ::dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr),
        error_(handle_ == nullptr ? (path == nullptr ? "PGCONF_MASK_INNER is not set"
                                                     : std::string(path) + ": " + ::dlerror())
                                  : "") {}
  ~InnerPlugin() {
    if (handle_ != nullptr) ::dlclose(handle_);
  }
  InnerPlugin(const InnerPlugin&) = delete;
  InnerPlugin& operator=(const InnerPlugin&) = delete;

  pg_backend_negotiate_fn negotiate() const {
    return handle_ == nullptr ? nullptr
                              : reinterpret_cast<pg_backend_negotiate_fn>(
                                    ::dlsym(handle_, PG_BACKEND_NEGOTIATE_SYMBOL));
  }
  const std::string& error() const { return error_; }

 private:
  void* handle_;
  std::string error_;
};

}  // namespace

extern "C" PG_BACKEND_EXPORT pg_status_t pg_backend_negotiate(const pg_backend_negotiate_in_t* in,
                                                              pg_backend_negotiate_out_t* out) {
  static const InnerPlugin inner(std::getenv("PGCONF_MASK_INNER"));  // loaded once
  const pg_backend_negotiate_fn negotiate = inner.negotiate();
  if (negotiate == nullptr) {
    const std::string message = "conformance mask plugin: cannot load the inner plugin: " +
                                (inner.error().empty() ? "no pg_backend_negotiate" : inner.error());
    if (in != nullptr && in->host != nullptr) in->host->set_error(in->host->ctx, message.c_str());
    return PG_ERR_BACKEND_NOT_FOUND;
  }
  const pg_status_t status = negotiate(in, out);
  if (status != PG_OK) return status;
  out->native_ops &= mask_from_env("PGCONF_MASK_OPS");
  out->native_dtypes &= mask_from_env("PGCONF_MASK_DTYPES");
  out->native_reduce_ops &= mask_from_env("PGCONF_MASK_REDUCE_OPS");
  return PG_OK;
}
