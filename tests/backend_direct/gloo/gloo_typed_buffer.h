// gloo_typed_buffer.h — a byte buffer of one procgroup dtype, read and written as doubles,
// and the deterministic data and references the gloo direct tests compare against.
//
//   TypedBuffer b(PG_DTYPE_BF16, 7);
//   b.set(3, 2.0);                       // stored as bfloat16
//   double v = b.get(3);                 // 2.0
//   pg_buffer_t pb = b.buffer();         // for a pg_backend_op_t
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gloo_test_support.h"
#include "procgroup/procgroup_backend.h"

namespace procgroup::gloo_test {

inline size_t element_size(pg_dtype_t dt) {
  switch (dt) {
    case PG_DTYPE_F64:
    case PG_DTYPE_I64: return 8;
    case PG_DTYPE_F32:
    case PG_DTYPE_I32: return 4;
    case PG_DTYPE_F16:
    case PG_DTYPE_BF16: return 2;
    default: return 1;
  }
}

inline const char* dtype_label(pg_dtype_t dt) {
  static const char* const kNames[] = {"invalid", "f32", "f64", "f16", "bf16",
                                       "i8",      "u8",  "i32", "i64"};
  return dt > 0 && dt < PG_DTYPE_COUNT_ ? kNames[dt] : "invalid";
}

class TypedBuffer {
 public:
  TypedBuffer(pg_dtype_t dt, size_t count)
      : dt_(dt), count_(count), bytes_(count * element_size(dt) + 1) {}

  pg_dtype_t dtype() const { return dt_; }
  size_t count() const { return count_; }
  std::byte* data() { return bytes_.data(); }
  // A view of elements [offset, offset + n) as an op buffer.
  pg_buffer_t buffer(size_t offset = 0, size_t n = SIZE_MAX) {
    return cpu(bytes_.data() + offset * element_size(dt_), n == SIZE_MAX ? count_ : n, dt_);
  }

  void set(size_t i, double v) {
    std::byte* p = bytes_.data() + i * element_size(dt_);
    switch (dt_) {
      case PG_DTYPE_F32: store(p, static_cast<float>(v)); break;
      case PG_DTYPE_F64: store(p, v); break;
      case PG_DTYPE_F16: store(p, to_f16(v)); break;
      case PG_DTYPE_BF16: store(p, to_bf16(v)); break;
      case PG_DTYPE_I8: store(p, static_cast<int8_t>(v)); break;
      case PG_DTYPE_U8: store(p, static_cast<uint8_t>(v)); break;
      case PG_DTYPE_I32: store(p, static_cast<int32_t>(v)); break;
      default: store(p, static_cast<int64_t>(v)); break;
    }
  }

  double get(size_t i) const {
    const std::byte* p = bytes_.data() + i * element_size(dt_);
    switch (dt_) {
      case PG_DTYPE_F32: return load<float>(p);
      case PG_DTYPE_F64: return load<double>(p);
      case PG_DTYPE_F16: return from_f16(load<uint16_t>(p));
      case PG_DTYPE_BF16: return from_bf16(load<uint16_t>(p));
      case PG_DTYPE_I8: return load<int8_t>(p);
      case PG_DTYPE_U8: return load<uint8_t>(p);
      case PG_DTYPE_I32: return load<int32_t>(p);
      default: return static_cast<double>(load<int64_t>(p));
    }
  }

  bool same_bytes(const TypedBuffer& other) const { return bytes_ == other.bytes_; }

 private:
  template <class T>
  static void store(std::byte* p, T v) {
    std::memcpy(p, &v, sizeof(T));
  }
  template <class T>
  static T load(const std::byte* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  }

  pg_dtype_t dt_;
  size_t count_;
  std::vector<std::byte> bytes_;  // one spare byte: data() is never null, even for count 0
};

// Rank r's element i for a reduction with op: small integers, exact in every dtype, so
// every summation order gives the same result. PROD stays within +-16, u8 non-negative.
inline double sample(int rank, size_t i, pg_reduce_op_t op, pg_dtype_t dt) {
  if (op == PG_REDUCE_PROD) {
    const double mag = 1 + static_cast<double>((static_cast<size_t>(rank) + i) % 2);
    return (dt != PG_DTYPE_U8 && rank == 0 && i % 5 == 0) ? -mag : mag;
  }
  const double v = static_cast<double>((static_cast<size_t>(rank) * 7 + i * 3) % 11);
  return dt == PG_DTYPE_U8 ? v : v - 5;
}

// The reduction of sample() over ranks 0..size-1, as the plugin + test host compute it.
inline double reduced(int size, size_t i, pg_reduce_op_t op, pg_dtype_t dt) {
  double acc = sample(0, i, op, dt);
  for (int r = 1; r < size; ++r) {
    const double v = sample(r, i, op, dt);
    switch (op) {
      case PG_REDUCE_PROD: acc *= v; break;
      case PG_REDUCE_MIN: acc = acc < v ? acc : v; break;
      case PG_REDUCE_MAX: acc = acc > v ? acc : v; break;
      default: acc += v; break;
    }
  }
  return op == PG_REDUCE_AVG ? host_scale(acc, dt, static_cast<uint64_t>(size)) : acc;
}

inline const char* reduce_label(pg_reduce_op_t op) {
  static const char* const kNames[] = {"sum", "avg", "prod", "min", "max"};
  return op >= 0 && op < PG_REDUCE_COUNT_ ? kNames[op] : "invalid";
}

}  // namespace procgroup::gloo_test
