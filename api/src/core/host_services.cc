#include "core/host_services.h"

#include <cstdlib>
#include <cstring>
#include <span>

#include "collectives/reduce.h"
#include "common/log.h"

namespace procgroup::detail {
namespace {

// Host callbacks are called from plugin code: none may throw.
void host_log(void*, int32_t level, const char* backend, const char* message) noexcept {
  try {
    if (log_enabled(level))
      log_line(level, backend ? backend : "backend", message ? message : "(null)");
  } catch (...) {
  }
}

void host_set_error(void*, const char* message) noexcept {
  try {
    set_last_error(message ? message : "");
  } catch (...) {
  }
}

pg_status_t host_reduce(void*, void* inout, const void* in, uint64_t count, pg_dtype_t dtype,
                        pg_reduce_op_t op) noexcept {
  return c_guard("host reduce", [&] { return reduce_into(inout, in, count, dtype, op); });
}

pg_status_t host_scale_down(void*, void* data, uint64_t count, pg_dtype_t dtype,
                            uint64_t divisor) noexcept {
  return c_guard("host scale_down", [&] { return scale_down(data, count, dtype, divisor); });
}

pg_status_t host_reduce_to(void*, void* out, const void* a, const void* b, uint64_t count,
                           pg_dtype_t dtype, pg_reduce_op_t op) noexcept {
  return c_guard("host reduce_to", [&] { return reduce_to(out, a, b, count, dtype, op); });
}

const pg_host_services_t kHostServices = {sizeof(pg_host_services_t),
                                          0,
                                          nullptr,
                                          host_log,
                                          host_set_error,
                                          host_reduce,
                                          host_scale_down,
                                          host_reduce_to};

HostStore* self(void* ctx) { return static_cast<HostStore*>(ctx); }

// Every store entry returns through here, so the store's own failure message is kept.
pg_status_t noted(void* ctx, pg_status_t status) {
  if (status == PG_ERR_STORE || status == PG_ERR_AUTH) self(ctx)->remember_failure(status, last_error());
  return status;
}

pg_status_t store_set(void* ctx, const char* key, const void* value, uint64_t length) noexcept {
  return noted(ctx, c_guard("store set", [&]() -> Status {
    if (key == nullptr || (value == nullptr && length > 0))
      return make_error(PG_ERR_INVALID_ARGUMENT, "store set: NULL key or value");
    auto bytes = std::span(static_cast<const uint8_t*>(value), length);
    return self(ctx)->store().set(key, bytes);
  }));
}

pg_status_t store_get(void* ctx, const char* key, int64_t timeout_ms, void** value,
                      uint64_t* length) noexcept {
  return noted(ctx, c_guard("store get", [&]() -> Status {
    if (key == nullptr || value == nullptr || length == nullptr)
      return make_error(PG_ERR_INVALID_ARGUMENT, "store get: NULL key or output pointer");
    Millis timeout = timeout_ms < 0 ? self(ctx)->default_timeout() : Millis(timeout_ms);
    PG_ASSIGN_OR_RETURN(Bytes bytes, self(ctx)->store().get(key, timeout));
    // malloc(0) may return NULL; always hand out a valid pointer.
    void* copy = std::malloc(bytes.empty() ? 1 : bytes.size());
    if (copy == nullptr) return make_error(PG_ERR_OUT_OF_MEMORY, "store get: out of memory");
    if (!bytes.empty()) std::memcpy(copy, bytes.data(), bytes.size());
    *value = copy;
    *length = bytes.size();
    return ok_status();
  }));
}

void store_free(void*, void* value) noexcept { std::free(value); }

pg_status_t store_add(void* ctx, const char* key, int64_t delta, int64_t* result) noexcept {
  return noted(ctx, c_guard("store add", [&]() -> Status {
    if (key == nullptr) return make_error(PG_ERR_INVALID_ARGUMENT, "store add: NULL key");
    PG_ASSIGN_OR_RETURN(int64_t value, self(ctx)->store().add(key, delta));
    if (result != nullptr) *result = value;
    return ok_status();
  }));
}

pg_status_t store_remove(void* ctx, const char* key) noexcept {
  return noted(ctx, c_guard("store remove", [&]() -> Status {
    if (key == nullptr) return make_error(PG_ERR_INVALID_ARGUMENT, "store remove: NULL key");
    PG_ASSIGN_OR_RETURN(bool existed, self(ctx)->store().remove(key));
    (void)existed;
    return ok_status();
  }));
}

}  // namespace

const pg_host_services_t* host_services() { return &kHostServices; }

HostStore::HostStore(std::shared_ptr<Store> store, Millis default_timeout)
    : store_(std::move(store)), default_timeout_(default_timeout), c_store_{sizeof(pg_host_store_t),
                                                                            0,
                                                                            this,
                                                                            store_set,
                                                                            store_get,
                                                                            store_free,
                                                                            store_add,
                                                                            store_remove} {}

void HostStore::remember_failure(pg_status_t, std::string_view message) {
  std::lock_guard lock(mutex_);
  last_failure_ = message;
}

std::string HostStore::last_failure() const {
  std::lock_guard lock(mutex_);
  return last_failure_;
}

Status backend_failure(pg_status_t code, std::string_view backend, std::string_view entry) {
  std::string message = last_error();
  if (message.empty())
    message = fmt::format("backend '{}' {} failed without a message", backend, entry);
  if (code == PG_OK || code == PG_PENDING) code = PG_ERR_BACKEND;
  return Status(code, std::move(message));
}

Status unexpected_plugin_status(pg_status_t code, std::string_view backend,
                                std::string_view entry) {
  const std::string said = last_error();
  const std::string why = code == PG_PENDING ? "only work_test and work_wait may return it"
                                             : "it is not a pg_status_t";
  return make_error(PG_ERR_BACKEND, "backend '{}' returned {} from {} ({}){}{}", backend,
                    code == PG_PENDING ? "PG_PENDING" : std::to_string(code), entry, why,
                    said.empty() ? "" : ": ", said);
}

}  // namespace procgroup::detail
