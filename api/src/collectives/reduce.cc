// Reduction kernels: one plain element loop per dtype and op, built with -O3 outside Debug
// and compiled three times (x86-64-v4, -v3, baseline) by target_clones, so the loader picks
// AVX-512 or AVX2 where the CPU has them. f16 uses F16C where present (8 conversions per
// instruction; GCC vectorises no f16 conversion) and float blocks on the stack otherwise;
// bf16 converts inline. The integer ops and semantics are those of reduce.h.
#include "collectives/reduce.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "common/dtype.h"
#include "procgroup/backend_kit/dtype.hpp"

namespace procgroup::detail {
namespace {

// Not under a sanitizer: target_clones' ifunc resolvers run before the sanitizer's runtime
// is up (TSan crashes at load); those builds check the baseline kernels.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define PG_KERNEL_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define PG_KERNEL_CLONES
#endif

// The kit's converters (branch-free, so the loops over them vectorise), by short names.
constexpr auto kHalfToFloat = &kit::half_to_float;
constexpr auto kFloatToHalf = &kit::float_to_half;
constexpr auto kBf16ToFloat = &kit::bf16_to_float;
constexpr auto kFloatToBf16 = &kit::float_to_bf16;

// Integer sum and product wrap modulo 2^bits: computed unsigned (no UB; 8-bit operands
// widen to unsigned, not int), and the conversion back is modular in C++20. Floating
// min/max let a NaN through (as torch.minimum does), so a NaN gradient is never dropped;
// ties (+0 vs -0) keep the left operand, which is why callers fix the operand order.
struct Sum {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    } else {
      return a + b;
    }
  }
};
struct Prod {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::conditional_t<sizeof(T) < sizeof(unsigned), unsigned, std::make_unsigned_t<T>>;
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    } else {
      return a * b;
    }
  }
};
struct Min {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return (b < a || std::isnan(b)) ? b : a;  // NaN wins
    return b < a ? b : a;
  }
};
struct Max {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return (b > a || std::isnan(b)) ? b : a;  // NaN wins
    return b > a ? b : a;
  }
};

template <class T, class Op>
[[gnu::always_inline]] inline void loop(void* out_v, const void* a_v, const void* b_v, size_t n) {
  T* out = static_cast<T*>(out_v);
  const T* a = static_cast<const T*>(a_v);
  const T* b = static_cast<const T*>(b_v);
  for (size_t i = 0; i < n; ++i) out[i] = Op::apply(a[i], b[i]);
}

// Each step its own simple loop: GCC vectorises those, not one convert-operate-convert loop.
constexpr size_t kBlock = 512;

template <float (*kTo)(uint16_t), uint16_t (*kFrom)(float), class Op>
[[gnu::always_inline]] inline void loop16(void* out_v, const void* a_v, const void* b_v, size_t n) {
  auto* out = static_cast<uint16_t*>(out_v);
  const auto* a = static_cast<const uint16_t*>(a_v);
  const auto* b = static_cast<const uint16_t*>(b_v);
  alignas(64) float x[kBlock];
  alignas(64) float y[kBlock];
  for (size_t base = 0; base < n; base += kBlock) {
    const size_t m = std::min(kBlock, n - base);
    for (size_t i = 0; i < m; ++i) x[i] = kTo(a[base + i]);
    for (size_t i = 0; i < m; ++i) y[i] = kTo(b[base + i]);
    for (size_t i = 0; i < m; ++i) x[i] = Op::apply(x[i], y[i]);
    for (size_t i = 0; i < m; ++i) out[base + i] = kFrom(x[i]);
  }
}

template <class T>
[[gnu::always_inline]] inline void by_op(void* out, const void* a, const void* b, size_t n,
                                         pg_reduce_op_t op) {
  switch (op) {
    case PG_REDUCE_PROD: return loop<T, Prod>(out, a, b, n);
    case PG_REDUCE_MIN: return loop<T, Min>(out, a, b, n);
    case PG_REDUCE_MAX: return loop<T, Max>(out, a, b, n);
    default: return loop<T, Sum>(out, a, b, n);  // SUM and AVG
  }
}

template <float (*kTo)(uint16_t), uint16_t (*kFrom)(float)>
[[gnu::always_inline]] inline void by_op16(void* out, const void* a, const void* b, size_t n,
                                           pg_reduce_op_t op) {
  switch (op) {
    case PG_REDUCE_PROD: return loop16<kTo, kFrom, Prod>(out, a, b, n);
    case PG_REDUCE_MIN: return loop16<kTo, kFrom, Min>(out, a, b, n);
    case PG_REDUCE_MAX: return loop16<kTo, kFrom, Max>(out, a, b, n);
    default: return loop16<kTo, kFrom, Sum>(out, a, b, n);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// 8 halves per instruction, with the scalar path's rounding (to nearest even) and NaN rules.
// One loop per op (kOp a constant): a runtime switch inside the loop costs up to a third.
template <pg_reduce_op_t kOp>
__attribute__((target("avx2,f16c"))) void f16c_loop(uint16_t* out, const uint16_t* a,
                                                    const uint16_t* b, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    const __m256 y = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    __m256 r;
    if constexpr (kOp == PG_REDUCE_PROD) {
      r = _mm256_mul_ps(x, y);
    } else if constexpr (kOp == PG_REDUCE_MIN) {  // (y < x || y is NaN) ? y : x, as Min
      r = _mm256_blendv_ps(
          x, y, _mm256_or_ps(_mm256_cmp_ps(y, x, _CMP_LT_OQ), _mm256_cmp_ps(y, y, _CMP_UNORD_Q)));
    } else if constexpr (kOp == PG_REDUCE_MAX) {
      r = _mm256_blendv_ps(
          x, y, _mm256_or_ps(_mm256_cmp_ps(y, x, _CMP_GT_OQ), _mm256_cmp_ps(y, y, _CMP_UNORD_Q)));
    } else {
      r = _mm256_add_ps(x, y);
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  if (i < n) by_op16<kHalfToFloat, kFloatToHalf>(out + i, a + i, b + i, n - i, kOp);
}

void reduce_f16_f16c(void* o, const void* a_v, const void* b_v, size_t n, pg_reduce_op_t op) {
  auto* out = static_cast<uint16_t*>(o);
  const auto* a = static_cast<const uint16_t*>(a_v);
  const auto* b = static_cast<const uint16_t*>(b_v);
  switch (op) {
    case PG_REDUCE_PROD: return f16c_loop<PG_REDUCE_PROD>(out, a, b, n);
    case PG_REDUCE_MIN: return f16c_loop<PG_REDUCE_MIN>(out, a, b, n);
    case PG_REDUCE_MAX: return f16c_loop<PG_REDUCE_MAX>(out, a, b, n);
    default: return f16c_loop<PG_REDUCE_SUM>(out, a, b, n);
  }
}

__attribute__((target("avx2,f16c"))) void scale_f16_f16c(void* data_v, size_t n, float inv) {
  auto* data = static_cast<uint16_t*>(data_v);
  const __m256 k = _mm256_set1_ps(inv);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(data + i)));
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(data + i),
        _mm256_cvtps_ph(_mm256_mul_ps(x, k), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < n; ++i) data[i] = kFloatToHalf(kHalfToFloat(data[i]) * inv);
}

bool have_f16c() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return yes;
}
#else
void reduce_f16_f16c(void*, const void*, const void*, size_t, pg_reduce_op_t) {}
void scale_f16_f16c(void*, size_t, float) {}
bool have_f16c() { return false; }
#endif

PG_KERNEL_CLONES void reduce_f32(void* o, const void* a, const void* b, size_t n,
                                 pg_reduce_op_t op) {
  by_op<float>(o, a, b, n, op);
}
PG_KERNEL_CLONES void reduce_f64(void* o, const void* a, const void* b, size_t n,
                                 pg_reduce_op_t op) {
  by_op<double>(o, a, b, n, op);
}
PG_KERNEL_CLONES void reduce_f16(void* o, const void* a, const void* b, size_t n,
                                 pg_reduce_op_t op) {
  if (have_f16c()) return reduce_f16_f16c(o, a, b, n, op);
  by_op16<kHalfToFloat, kFloatToHalf>(o, a, b, n, op);
}
// bf16's conversions are shifts and adds: one fused loop per op vectorises, and beats the
// float blocks the f16 fallback needs.
template <class Op>
[[gnu::always_inline]] inline void bf16_loop(void* out_v, const void* a_v, const void* b_v,
                                             size_t n) {
  auto* out = static_cast<uint16_t*>(out_v);
  const auto* a = static_cast<const uint16_t*>(a_v);
  const auto* b = static_cast<const uint16_t*>(b_v);
  for (size_t i = 0; i < n; ++i)
    out[i] = kFloatToBf16(Op::apply(kBf16ToFloat(a[i]), kBf16ToFloat(b[i])));
}

PG_KERNEL_CLONES void reduce_bf16(void* o, const void* a, const void* b, size_t n,
                                  pg_reduce_op_t op) {
  switch (op) {
    case PG_REDUCE_PROD: return bf16_loop<Prod>(o, a, b, n);
    case PG_REDUCE_MIN: return bf16_loop<Min>(o, a, b, n);
    case PG_REDUCE_MAX: return bf16_loop<Max>(o, a, b, n);
    default: return bf16_loop<Sum>(o, a, b, n);
  }
}
PG_KERNEL_CLONES void reduce_i8(void* o, const void* a, const void* b, size_t n,
                                pg_reduce_op_t op) {
  by_op<int8_t>(o, a, b, n, op);
}
PG_KERNEL_CLONES void reduce_u8(void* o, const void* a, const void* b, size_t n,
                                pg_reduce_op_t op) {
  by_op<uint8_t>(o, a, b, n, op);
}
PG_KERNEL_CLONES void reduce_i32(void* o, const void* a, const void* b, size_t n,
                                 pg_reduce_op_t op) {
  by_op<int32_t>(o, a, b, n, op);
}
PG_KERNEL_CLONES void reduce_i64(void* o, const void* a, const void* b, size_t n,
                                 pg_reduce_op_t op) {
  by_op<int64_t>(o, a, b, n, op);
}

template <class T>
[[gnu::always_inline]] inline void scale_loop(void* data_v, size_t n, uint64_t divisor) {
  T* data = static_cast<T*>(data_v);
  if constexpr (std::is_floating_point_v<T>) {
    const T inv = T{1} / static_cast<T>(divisor);
    for (size_t i = 0; i < n; ++i) data[i] *= inv;
  } else if constexpr (sizeof(T) <= 4) {
    // Exact through double, and it vectorises where integer division does not: |x| < 2^53,
    // so a non-integer quotient is at least 1/d from an integer, far more than the rounding.
    const auto d = static_cast<double>(divisor);
    for (size_t i = 0; i < n; ++i) data[i] = static_cast<T>(static_cast<double>(data[i]) / d);
  } else if constexpr (std::is_signed_v<T>) {
    // Every |value| < 2^63 <= a divisor this large, so truncation gives 0 (and the divisor
    // would not fit the signed type).
    if (divisor > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      std::memset(data, 0, n * sizeof(T));
      return;
    }
    const auto d = static_cast<int64_t>(divisor);
    for (size_t i = 0; i < n; ++i) data[i] = static_cast<T>(int64_t{data[i]} / d);
  } else {
    for (size_t i = 0; i < n; ++i) data[i] = static_cast<T>(uint64_t{data[i]} / divisor);
  }
}

template <float (*kTo)(uint16_t), uint16_t (*kFrom)(float)>
[[gnu::always_inline]] inline void scale_loop16(void* data_v, size_t n, uint64_t divisor) {
  auto* data = static_cast<uint16_t*>(data_v);
  const float inv = 1.0f / static_cast<float>(divisor);
  alignas(64) float x[kBlock];
  for (size_t base = 0; base < n; base += kBlock) {
    const size_t m = std::min(kBlock, n - base);
    for (size_t i = 0; i < m; ++i) x[i] = kTo(data[base + i]) * inv;
    for (size_t i = 0; i < m; ++i) data[base + i] = kFrom(x[i]);
  }
}

PG_KERNEL_CLONES void scale_any(void* data, size_t n, pg_dtype_t dtype, uint64_t divisor) {
  switch (dtype) {
    case PG_DTYPE_F32: return scale_loop<float>(data, n, divisor);
    case PG_DTYPE_F64: return scale_loop<double>(data, n, divisor);
    case PG_DTYPE_F16:
      if (have_f16c()) return scale_f16_f16c(data, n, 1.0f / static_cast<float>(divisor));
      return scale_loop16<kHalfToFloat, kFloatToHalf>(data, n, divisor);
    case PG_DTYPE_BF16: return scale_loop16<kBf16ToFloat, kFloatToBf16>(data, n, divisor);
    case PG_DTYPE_I8: return scale_loop<int8_t>(data, n, divisor);
    case PG_DTYPE_U8: return scale_loop<uint8_t>(data, n, divisor);
    case PG_DTYPE_I32: return scale_loop<int32_t>(data, n, divisor);
    case PG_DTYPE_I64: return scale_loop<int64_t>(data, n, divisor);
    default: return;
  }
}

using Kernel = void (*)(void*, const void*, const void*, size_t, pg_reduce_op_t);

Kernel kernel_for(pg_dtype_t dtype) {
  switch (dtype) {
    case PG_DTYPE_F32: return &reduce_f32;
    case PG_DTYPE_F64: return &reduce_f64;
    case PG_DTYPE_F16: return &reduce_f16;
    case PG_DTYPE_BF16: return &reduce_bf16;
    case PG_DTYPE_I8: return &reduce_i8;
    case PG_DTYPE_U8: return &reduce_u8;
    case PG_DTYPE_I32: return &reduce_i32;
    case PG_DTYPE_I64: return &reduce_i64;
    default: return nullptr;
  }
}

}  // namespace

Status reduce_to(void* out, const void* a, const void* b, uint64_t count, pg_dtype_t dtype,
                 pg_reduce_op_t op) {
  if (!reduce_op_valid(op)) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "reduce: invalid reduce op {}", op);
  }
  const Kernel kernel = kernel_for(dtype);
  if (kernel == nullptr) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "reduce: invalid dtype {}", dtype);
  }
  if (count == 0) return ok_status();
  if (out == nullptr || a == nullptr || b == nullptr) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "reduce: null buffer for {} elements", count);
  }
  kernel(out, a, b, static_cast<size_t>(count), op);
  return ok_status();
}

Status reduce_into(void* inout, const void* in, uint64_t count, pg_dtype_t dtype,
                   pg_reduce_op_t op) {
  return reduce_to(inout, inout, in, count, dtype, op);
}

Status scale_down(void* data, uint64_t count, pg_dtype_t dtype, uint64_t divisor) {
  if (divisor == 0) return make_error(PG_ERR_INVALID_ARGUMENT, "scale_down: divisor is 0");
  if (!dtype_valid(dtype)) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "scale_down: invalid dtype {}", dtype);
  }
  if (count == 0 || divisor == 1) return ok_status();
  if (data == nullptr) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "scale_down: null buffer for {} elements", count);
  }
  scale_any(data, static_cast<size_t>(count), dtype, divisor);
  return ok_status();
}

}  // namespace procgroup::detail
