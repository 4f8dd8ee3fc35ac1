// direct_host.h — what a test supplies to a backend plugin in place of libprocgroup: host
// services (set_error captured per thread, simple reduce/scale_down kernels for f32, f64,
// i32 and i64) and an in-memory rendezvous store with per-group prefixed views. Part of
// direct_harness.h; include that.
//
//   const pg_host_services_t* host = direct::test_host();
//   auto base = std::make_shared<direct::MemoryStore>();
//   direct::ScopedStore store(base, "pg/world/", 30000);   // store.get() -> pg_host_store_t*
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

#include "procgroup/procgroup_backend.h"

namespace procgroup::direct {

// ---- Host services: error capture and simple reduction kernels ----------------------

inline thread_local std::string t_last_error;
inline thread_local int t_error_count = 0;

// This thread's last set_error message (and forget it).
inline std::string take_error() { return std::exchange(t_last_error, std::string()); }

namespace internal {

template <class T>
void reduce_typed(void* inout, const void* in, uint64_t count, pg_reduce_op_t op) {
  T* a = static_cast<T*>(inout);
  const T* b = static_cast<const T*>(in);
  for (uint64_t i = 0; i < count; ++i) {
    switch (op) {
      case PG_REDUCE_SUM: a[i] = static_cast<T>(a[i] + b[i]); break;
      case PG_REDUCE_PROD: a[i] = static_cast<T>(a[i] * b[i]); break;
      case PG_REDUCE_MIN: a[i] = std::min(a[i], b[i]); break;
      case PG_REDUCE_MAX: a[i] = std::max(a[i], b[i]); break;
    }
  }
}

template <class T>
void scale_typed(void* data, uint64_t count, uint64_t divisor) {
  T* a = static_cast<T*>(data);
  for (uint64_t i = 0; i < count; ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      a[i] *= T(1) / static_cast<T>(divisor);
    } else {
      a[i] = static_cast<T>(a[i] / static_cast<T>(divisor));
    }
  }
}

inline void host_set_error(void*, const char* message) {
  t_last_error = message != nullptr ? message : "";
  ++t_error_count;
}

inline void host_log(void*, int32_t level, const char* backend, const char* message) {
  if (level <= PG_LOG_WARN) std::fprintf(stderr, "[%s] %s\n", backend, message);
}

inline pg_status_t host_reduce(void*, void* inout, const void* in, uint64_t count, pg_dtype_t dtype,
                               pg_reduce_op_t op) {
  if (op != PG_REDUCE_SUM && op != PG_REDUCE_PROD && op != PG_REDUCE_MIN && op != PG_REDUCE_MAX) {
    host_set_error(nullptr, "test host: reduce op not supported");
    return PG_ERR_INVALID_ARGUMENT;
  }
  switch (dtype) {
    case PG_DTYPE_F32: reduce_typed<float>(inout, in, count, op); return PG_OK;
    case PG_DTYPE_F64: reduce_typed<double>(inout, in, count, op); return PG_OK;
    case PG_DTYPE_I32: reduce_typed<int32_t>(inout, in, count, op); return PG_OK;
    case PG_DTYPE_I64: reduce_typed<int64_t>(inout, in, count, op); return PG_OK;
    default: host_set_error(nullptr, "test host: dtype not supported"); return PG_ERR_UNSUPPORTED;
  }
}

inline pg_status_t host_scale_down(void*, void* data, uint64_t count, pg_dtype_t dtype,
                                   uint64_t divisor) {
  switch (dtype) {
    case PG_DTYPE_F32: scale_typed<float>(data, count, divisor); return PG_OK;
    case PG_DTYPE_F64: scale_typed<double>(data, count, divisor); return PG_OK;
    case PG_DTYPE_I32: scale_typed<int32_t>(data, count, divisor); return PG_OK;
    case PG_DTYPE_I64: scale_typed<int64_t>(data, count, divisor); return PG_OK;
    default: host_set_error(nullptr, "test host: dtype not supported"); return PG_ERR_UNSUPPORTED;
  }
}

}  // namespace internal

// The host services every Plugin negotiates with (static: it must outlive the plugin).
inline const pg_host_services_t* test_host() {
  static const pg_host_services_t host = {sizeof(pg_host_services_t),
                                          0,
                                          nullptr,
                                          &internal::host_log,
                                          &internal::host_set_error,
                                          &internal::host_reduce,
                                          &internal::host_scale_down,
                                          nullptr};  // no reduce_to: plugins use reduce
  return &host;
}

// What the reference computation in a test does to match host_reduce + host_scale_down.
template <class T>
T reduce_ref(T a, T b, pg_reduce_op_t op) {
  T out = a;
  internal::reduce_typed<T>(&out, &b, 1, op == PG_REDUCE_AVG ? PG_REDUCE_SUM : op);
  return out;
}
template <class T>
T scale_ref(T a, uint64_t divisor) {
  internal::scale_typed<T>(&a, 1, divisor);
  return a;
}

// ---- Rendezvous store ----------------------------------------------------------------

// A thread-safe in-memory key-value store; ScopedStore gives one group a prefixed view.
class MemoryStore {
 public:
  static constexpr int64_t kForeverMs = int64_t{1} << 40;  // longer waits do not time out

  void set(const std::string& key, std::string value) {
    {
      std::lock_guard lock(mu_);
      map_[key] = std::move(value);
    }
    cv_.notify_all();
  }
  bool get(const std::string& key, int64_t timeout_ms, std::string* value) {
    std::unique_lock lock(mu_);
    auto found = [&] { return map_.count(key) != 0; };
    if (timeout_ms >= kForeverMs) {
      cv_.wait(lock, found);
    } else if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), found)) {
      return false;
    }
    *value = map_[key];
    return true;
  }
  int64_t add(const std::string& key, int64_t delta) {
    std::lock_guard lock(mu_);
    int64_t v = std::strtoll(map_[key].c_str(), nullptr, 10) + delta;
    map_[key] = std::to_string(v);
    cv_.notify_all();
    return v;
  }
  bool remove(const std::string& key) {
    std::lock_guard lock(mu_);
    return map_.erase(key) != 0;
  }
  bool contains(const std::string& key) {
    std::lock_guard lock(mu_);
    return map_.count(key) != 0;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> map_;
};

class ScopedStore {
 public:
  ScopedStore(std::shared_ptr<MemoryStore> base, std::string prefix, int64_t default_timeout_ms)
      : base_(std::move(base)), prefix_(std::move(prefix)), timeout_ms_(default_timeout_ms) {
    store_ = {sizeof(pg_host_store_t), 0, this, &set, &get, &free_value, &add, &remove};
  }
  ScopedStore(const ScopedStore&) = delete;
  ScopedStore& operator=(const ScopedStore&) = delete;
  const pg_host_store_t* get() const { return &store_; }
  MemoryStore& base() { return *base_; }
  const std::string& prefix() const { return prefix_; }

 private:
  static ScopedStore* self(void* ctx) { return static_cast<ScopedStore*>(ctx); }
  static pg_status_t set(void* ctx, const char* key, const void* value, uint64_t length) {
    self(ctx)->base_->set(self(ctx)->prefix_ + key,
                          std::string(static_cast<const char*>(value), length));
    return PG_OK;
  }
  static pg_status_t get(void* ctx, const char* key, int64_t timeout_ms, void** value,
                         uint64_t* length) {
    std::string v;
    if (timeout_ms < 0) timeout_ms = self(ctx)->timeout_ms_;
    if (!self(ctx)->base_->get(self(ctx)->prefix_ + key, timeout_ms, &v)) {
      internal::host_set_error(nullptr, "test store: key not found in time");
      return PG_ERR_TIMEOUT;
    }
    *value = std::malloc(v.size() + 1);
    if (*value == nullptr) return PG_ERR_OUT_OF_MEMORY;
    std::memcpy(*value, v.data(), v.size());
    *length = v.size();
    return PG_OK;
  }
  static void free_value(void*, void* value) { std::free(value); }
  static pg_status_t add(void* ctx, const char* key, int64_t delta, int64_t* result) {
    *result = self(ctx)->base_->add(self(ctx)->prefix_ + key, delta);
    return PG_OK;
  }
  static pg_status_t remove(void* ctx, const char* key) {
    self(ctx)->base_->remove(self(ctx)->prefix_ + key);
    return PG_OK;
  }

  std::shared_ptr<MemoryStore> base_;
  std::string prefix_;
  int64_t timeout_ms_;
  pg_host_store_t store_{};
};

}  // namespace procgroup::direct
