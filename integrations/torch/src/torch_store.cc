#include "torch_store.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

namespace procgroup::torch_backend {
namespace {

thread_local std::string t_error;

c10d::Store& store_of(void* ctx) { return *static_cast<c10d::Store*>(ctx); }

// Runs one store call; an exception becomes a status and this thread's message. torch
// reports a wait that ran out by exceptions whose text says so (1.13: "Socket Timeout",
// "Wait timeout"; 2.x: DistStoreError "... timeout ...").
template <class F>
pg_status_t guarded(const char* call, const char* key, F&& f) noexcept {
  try {
    f();
    return PG_OK;
  } catch (const std::exception& e) {
    std::string what = e.what();
    // c10::Error appends a C++ backtrace after the first line; keep torch's sentence.
    if (auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
    t_error = std::string("torch store ") + call + "(" + (key ? key : "") + "): " + what;
    const bool timed_out = what.find("imeout") != std::string::npos ||
                           what.find("timed out") != std::string::npos;
    return timed_out ? PG_ERR_TIMEOUT : PG_ERR_STORE;
  } catch (...) {
    t_error = std::string("torch store ") + call + ": unknown exception";
    return PG_ERR_STORE;
  }
}

pg_status_t store_set(void* ctx, const char* key, const void* value, uint64_t length) noexcept {
  return guarded("set", key, [&] {
    const auto* bytes = static_cast<const uint8_t*>(value);
    store_of(ctx).set(key, std::vector<uint8_t>(bytes, bytes + length));
  });
}

pg_status_t store_get(void* ctx, const char* key, int64_t timeout_ms, void** value,
                      uint64_t* length) noexcept {
  return guarded("get", key, [&] {
    // c10d's get() waits with the store's own timeout; ours comes first.
    store_of(ctx).wait({key}, std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 1)));
    std::vector<uint8_t> bytes = store_of(ctx).get(key);
    void* copy = std::malloc(bytes.empty() ? 1 : bytes.size());
    if (copy == nullptr) throw std::bad_alloc();
    if (!bytes.empty()) std::memcpy(copy, bytes.data(), bytes.size());
    *value = copy;
    *length = bytes.size();
  });
}

void store_free(void*, void* value) noexcept { std::free(value); }

pg_status_t store_add(void* ctx, const char* key, int64_t delta, int64_t* result) noexcept {
  return guarded("add", key, [&] { *result = store_of(ctx).add(key, delta); });
}

pg_status_t store_check(void* ctx, const char* key, int32_t* exists) noexcept {
  return guarded("check", key, [&] { *exists = store_of(ctx).check({key}) ? 1 : 0; });
}

pg_status_t store_remove(void* ctx, const char* key) noexcept {
  return guarded("deleteKey", key, [&] { (void)store_of(ctx).deleteKey(key); });
}

const char* store_error(void*) noexcept { return t_error.c_str(); }

}  // namespace

TorchStore::TorchStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {
  c_store_ = PG_STORE_INIT;
  c_store_.ctx = store_.get();
  c_store_.set = store_set;
  c_store_.get = store_get;
  c_store_.free_value = store_free;
  c_store_.add = store_add;
  c_store_.check = store_check;
  c_store_.remove = store_remove;
  c_store_.error_message = store_error;
}

}  // namespace procgroup::torch_backend
