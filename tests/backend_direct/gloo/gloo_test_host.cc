// The test-local host of the gloo direct tests: set_error, log capture, scale_down for
// every dtype, independent f16/bf16 encodings, and the file store (see gloo_test_support.h).
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <type_traits>
#include <utility>

#include "gloo_test_support.h"

namespace procgroup::gloo_test {
namespace {

thread_local std::string t_error;

void host_set_error(void*, const char* message) { t_error = message != nullptr ? message : ""; }

std::mutex g_log_mu;
std::vector<std::string> g_log;

void host_log(void*, int32_t level, const char* backend, const char* message) {
  if (level <= PG_LOG_WARN) std::fprintf(stderr, "[%s] %s\n", backend, message);
  std::lock_guard<std::mutex> lock(g_log_mu);
  g_log.emplace_back(message);
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

template <uint16_t (*kTo)(double), double (*kFrom)(uint16_t)>
void scale_half(void* data, uint64_t count, uint64_t divisor) {
  auto* a = static_cast<uint16_t*>(data);
  for (uint64_t i = 0; i < count; ++i) {
    a[i] = kTo(static_cast<float>(kFrom(a[i])) * (1.0f / static_cast<float>(divisor)));
  }
}

pg_status_t host_scale_down(void*, void* data, uint64_t count, pg_dtype_t dtype, uint64_t divisor) {
  switch (dtype) {
    case PG_DTYPE_F32: scale_typed<float>(data, count, divisor); return PG_OK;
    case PG_DTYPE_F64: scale_typed<double>(data, count, divisor); return PG_OK;
    case PG_DTYPE_F16: scale_half<to_f16, from_f16>(data, count, divisor); return PG_OK;
    case PG_DTYPE_BF16: scale_half<to_bf16, from_bf16>(data, count, divisor); return PG_OK;
    case PG_DTYPE_I8: scale_typed<int8_t>(data, count, divisor); return PG_OK;
    case PG_DTYPE_U8: scale_typed<uint8_t>(data, count, divisor); return PG_OK;
    case PG_DTYPE_I32: scale_typed<int32_t>(data, count, divisor); return PG_OK;
    case PG_DTYPE_I64: scale_typed<int64_t>(data, count, divisor); return PG_OK;
    default: host_set_error(nullptr, "test host: bad dtype"); return PG_ERR_INVALID_ARGUMENT;
  }
}

// The plugin reduces itself; a host reduce that is called is a test failure.
pg_status_t host_reduce(void*, void*, const void*, uint64_t, pg_dtype_t, pg_reduce_op_t) {
  host_set_error(nullptr, "test host: reduce should not be called by the gloo plugin");
  return PG_ERR_INTERNAL;
}

// Encodes |value| into an IEEE format with `mant` fraction bits and `ebits` exponent bits.
uint16_t encode(double value, int mant, int ebits) {
  const int bias = (1 << (ebits - 1)) - 1;
  const uint16_t sign = std::signbit(value) ? uint16_t(1u << (mant + ebits)) : 0;
  const uint16_t inf = uint16_t(((1u << ebits) - 1) << mant);
  if (std::isnan(value)) return uint16_t(sign | inf | (1u << (mant - 1)));
  double a = std::fabs(value);
  if (std::isinf(a)) return sign | inf;
  if (a == 0) return sign;
  int e = 0;
  std::frexp(a, &e);
  int exp = std::max(e - 1, 1 - bias);                   // subnormals share the lowest exponent
  double q = std::nearbyint(std::ldexp(a, mant - exp));  // ties to even (default mode)
  if (q >= std::ldexp(1.0, mant + 1)) {
    q /= 2;
    ++exp;
  }
  if (exp > bias) return sign | inf;
  if (q < std::ldexp(1.0, mant)) return uint16_t(sign | static_cast<uint16_t>(q));
  return uint16_t(sign | ((exp + bias) << mant) | (static_cast<uint32_t>(q) - (1u << mant)));
}

double decode(uint16_t bits, int mant, int ebits) {
  const int bias = (1 << (ebits - 1)) - 1;
  const int exp = (bits >> mant) & ((1 << ebits) - 1);
  const double frac = bits & ((1u << mant) - 1);
  const double sign = (bits >> (mant + ebits)) & 1 ? -1.0 : 1.0;
  if (exp == (1 << ebits) - 1) return frac != 0 ? NAN : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(frac, 1 - bias - mant);
  return sign * std::ldexp(frac + std::ldexp(1.0, mant), exp - bias - mant);
}

std::string hex(const std::string& key) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : key) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

FileStore* self(void* ctx) { return static_cast<FileStore*>(ctx); }

}  // namespace

const pg_host_services_t* test_host() {
  static const pg_host_services_t host = {sizeof(pg_host_services_t),
                                          0,
                                          nullptr,
                                          &host_log,
                                          &host_set_error,
                                          &host_reduce,
                                          &host_scale_down};
  return &host;
}

std::string take_error() { return std::exchange(t_error, std::string()); }

std::vector<std::string> logged() {
  std::lock_guard<std::mutex> lock(g_log_mu);
  return g_log;
}

uint16_t to_f16(double value) { return encode(static_cast<float>(value), 10, 5); }
uint16_t to_bf16(double value) { return encode(static_cast<float>(value), 7, 8); }
double from_f16(uint16_t bits) { return decode(bits, 10, 5); }
double from_bf16(uint16_t bits) { return decode(bits, 7, 8); }

double host_scale(double value, pg_dtype_t dtype, uint64_t divisor) {
  switch (dtype) {
    case PG_DTYPE_F32: return static_cast<float>(value) * (1.0f / static_cast<float>(divisor));
    case PG_DTYPE_F64: return value * (1.0 / static_cast<double>(divisor));
    case PG_DTYPE_F16: return from_f16(to_f16(static_cast<float>(value) * (1.0f / divisor)));
    case PG_DTYPE_BF16: return from_bf16(to_bf16(static_cast<float>(value) * (1.0f / divisor)));
    default:
      return static_cast<double>(static_cast<int64_t>(value) / static_cast<int64_t>(divisor));
  }
}

// ---- FileStore -----------------------------------------------------------------------

FileStore::FileStore(std::string dir, int64_t default_timeout_ms)
    : dir_(std::move(dir)), timeout_ms_(default_timeout_ms) {
  store_.struct_size = sizeof(store_);
  store_.ctx = this;
  store_.set = [](void* ctx, const char* key, const void* value, uint64_t length) {
    self(ctx)->put(key, std::string(static_cast<const char*>(value), length));
    return pg_status_t{PG_OK};
  };
  store_.get = [](void* ctx, const char* key, int64_t timeout_ms, void** value, uint64_t* length) {
    std::string v;
    if (!self(ctx)->fetch(key, timeout_ms < 0 ? self(ctx)->timeout_ms_ : timeout_ms, &v)) {
      host_set_error(nullptr, "test store: key never appeared");
      return pg_status_t{PG_ERR_TIMEOUT};
    }
    *value = std::malloc(v.size() + 1);
    std::memcpy(*value, v.data(), v.size());
    *length = v.size();
    return pg_status_t{PG_OK};
  };
  store_.free_value = [](void*, void* value) { std::free(value); };
  store_.add = [](void* ctx, const char* key, int64_t delta, int64_t* result) {
    const std::string lock_path = self(ctx)->dir_ + "/.lock";
    const int fd = ::open(lock_path.c_str(), O_CREAT | O_RDWR, 0600);
    if (fd < 0) return pg_status_t{PG_ERR_STORE};
    ::flock(fd, LOCK_EX);
    std::string old;
    self(ctx)->fetch(key, 0, &old);
    *result = std::strtoll(old.c_str(), nullptr, 10) + delta;
    self(ctx)->put(key, std::to_string(*result));
    ::flock(fd, LOCK_UN);
    ::close(fd);
    return pg_status_t{PG_OK};
  };
  store_.remove = [](void* ctx, const char* key) {
    std::filesystem::remove(self(ctx)->path(key));
    return pg_status_t{PG_OK};
  };
}

std::string FileStore::path(const std::string& key) const { return dir_ + "/k-" + hex(key); }

void FileStore::put(const std::string& key, const std::string& value) {
  static std::atomic<int> counter{0};
  const std::string tmp =
      dir_ + "/tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  {
    std::ofstream f(tmp, std::ios::binary);
    f.write(value.data(), static_cast<std::streamsize>(value.size()));
  }
  std::filesystem::rename(tmp, path(key));
}

bool FileStore::fetch(const std::string& key, int64_t timeout_ms, std::string* value) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    std::ifstream f(path(key), std::ios::binary);
    if (f) {
      std::ostringstream s;
      s << f.rdbuf();
      *value = s.str();
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace procgroup::gloo_test
