// Reduction kernels of the ucx backend (see ucx_reduce.h). Each dtype's kernel is one plain
// element loop per reduce op, compiled three times (x86-64-v4, -v3, baseline) and chosen by
// the loader (ifunc), so one binary uses AVX-512 or AVX2 (and F16C for f16) where present.
#include "ucx_reduce.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <bit>
#include <cstring>
#include <type_traits>

namespace procgroup::ucx_backend {
namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define UCX_KERNEL_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define UCX_KERNEL_CLONES
#endif

// Integer sum/product wrap modulo 2^bits (computed unsigned: no UB); float min/max let a
// NaN through, so a NaN gradient is never dropped. The same semantics as the core's kernels.
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
    if constexpr (std::is_floating_point_v<T>) return (b < a || b != b) ? b : a;
    return b < a ? b : a;
  }
};
struct Max {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) return (b > a || b != b) ? b : a;
    return b > a ? b : a;
  }
};

// ---- 16-bit float conversions, branch-free so the loops vectorise ------------------------

// Bit manipulation rather than _Float16: GCC 12 does not vectorise _Float16 conversions
// (one libgcc call per element), while these selects and shifts vectorise everywhere.
[[gnu::always_inline]] inline float h2f(uint16_t h) {
  constexpr uint32_t kShiftedExp = 0x7c00u << 13;
  uint32_t o = (uint32_t{h} & 0x7fffu) << 13;
  const uint32_t exp = o & kShiftedExp;
  o += (127u - 15u) << 23;
  const uint32_t inf_nan = o + ((128u - 16u) << 23);
  const uint32_t sub = std::bit_cast<uint32_t>(std::bit_cast<float>(o + (1u << 23)) -
                                               std::bit_cast<float>(113u << 23));
  o = exp == kShiftedExp ? inf_nan : (exp == 0 ? sub : o);
  return std::bit_cast<float>(o | ((uint32_t{h} & 0x8000u) << 16));
}

[[gnu::always_inline]] inline uint16_t f2h(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  constexpr uint32_t kDenormMagic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  const uint32_t special = u > (255u << 23) ? (0x7e00u | ((u >> 13) & 0x3ffu)) : 0x7c00u;
  const uint32_t sub =
      std::bit_cast<uint32_t>(std::bit_cast<float>(u) + std::bit_cast<float>(kDenormMagic)) -
      kDenormMagic;
  const uint32_t normal = (u + ((15u - 127u) << 23) + 0xfffu + ((u >> 13) & 1u)) >> 13;
  const uint32_t o = u >= ((127u + 16u) << 23) ? special : (u < (113u << 23) ? sub : normal);
  return static_cast<uint16_t>(o | (sign >> 16));
}

[[gnu::always_inline]] inline float b2f(uint16_t b) {
  return std::bit_cast<float>(uint32_t{b} << 16);
}

[[gnu::always_inline]] inline uint16_t f2b(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t nan = (u >> 16) | 0x40u;  // truncating a NaN must not make it Inf
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

// ---- Loops ---------------------------------------------------------------------------------

template <class T, class Op>
[[gnu::always_inline]] inline void loop(void* out_v, const void* a_v, const void* b_v, size_t n) {
  T* out = static_cast<T*>(out_v);
  const T* a = static_cast<const T*>(a_v);
  const T* b = static_cast<const T*>(b_v);
  for (size_t i = 0; i < n; ++i) out[i] = Op::apply(a[i], b[i]);
}

// 16-bit floats go through float blocks on the stack, each step its own simple loop: GCC
// vectorises those, not one loop doing convert-operate-convert per element.
constexpr size_t kBlock = 512;

template <float (*kToFloat)(uint16_t), uint16_t (*kFromFloat)(float), class Op>
[[gnu::always_inline]] inline void loop16(void* out_v, const void* a_v, const void* b_v, size_t n) {
  auto* out = static_cast<uint16_t*>(out_v);
  const auto* a = static_cast<const uint16_t*>(a_v);
  const auto* b = static_cast<const uint16_t*>(b_v);
  alignas(64) float x[kBlock];
  alignas(64) float y[kBlock];
  for (size_t base = 0; base < n; base += kBlock) {
    const size_t m = std::min(kBlock, n - base);
    for (size_t i = 0; i < m; ++i) x[i] = kToFloat(a[base + i]);
    for (size_t i = 0; i < m; ++i) y[i] = kToFloat(b[base + i]);
    for (size_t i = 0; i < m; ++i) x[i] = Op::apply(x[i], y[i]);
    for (size_t i = 0; i < m; ++i) out[base + i] = kFromFloat(x[i]);
  }
}

template <class T>
[[gnu::always_inline]] inline void dispatch(void* out, const void* a, const void* b, size_t n,
                                            pg_reduce_op_t op) {
  switch (op) {
    case PG_REDUCE_PROD: return loop<T, Prod>(out, a, b, n);
    case PG_REDUCE_MIN: return loop<T, Min>(out, a, b, n);
    case PG_REDUCE_MAX: return loop<T, Max>(out, a, b, n);
    default: return loop<T, Sum>(out, a, b, n);
  }
}

template <float (*kTo)(uint16_t), uint16_t (*kFrom)(float)>
[[gnu::always_inline]] inline void dispatch16(void* out, const void* a, const void* b, size_t n,
                                              pg_reduce_op_t op) {
  switch (op) {
    case PG_REDUCE_PROD: return loop16<kTo, kFrom, Prod>(out, a, b, n);
    case PG_REDUCE_MIN: return loop16<kTo, kFrom, Min>(out, a, b, n);
    case PG_REDUCE_MAX: return loop16<kTo, kFrom, Max>(out, a, b, n);
    default: return loop16<kTo, kFrom, Sum>(out, a, b, n);
  }
}

UCX_KERNEL_CLONES void reduce_f32(void* o, const void* a, const void* b, size_t n,
                                  pg_reduce_op_t op) {
  dispatch<float>(o, a, b, n, op);
}
UCX_KERNEL_CLONES void reduce_f64(void* o, const void* a, const void* b, size_t n,
                                  pg_reduce_op_t op) {
  dispatch<double>(o, a, b, n, op);
}
#if defined(__x86_64__) && defined(__GNUC__)
// GCC vectorises neither _Float16 conversions nor the bit-level ones above for f16 (it does
// for bf16), so f16 uses F16C directly where the CPU has it: 8 halves per instruction, the
// same rounding (to nearest even) and NaN rules as the scalar path.
__attribute__((target("avx2,f16c"))) void reduce_f16_f16c(void* o, const void* a_v, const void* b_v,
                                                          size_t n, pg_reduce_op_t op) {
  auto* out = static_cast<uint16_t*>(o);
  const auto* a = static_cast<const uint16_t*>(a_v);
  const auto* b = static_cast<const uint16_t*>(b_v);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    const __m256 y = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    __m256 r;
    switch (op) {
      case PG_REDUCE_PROD: r = _mm256_mul_ps(x, y); break;
      case PG_REDUCE_MIN:  // (y < x || y is NaN) ? y : x, as Min::apply
        r = _mm256_blendv_ps(
            x, y, _mm256_or_ps(_mm256_cmp_ps(y, x, _CMP_LT_OQ), _mm256_cmp_ps(y, y, _CMP_UNORD_Q)));
        break;
      case PG_REDUCE_MAX:
        r = _mm256_blendv_ps(
            x, y, _mm256_or_ps(_mm256_cmp_ps(y, x, _CMP_GT_OQ), _mm256_cmp_ps(y, y, _CMP_UNORD_Q)));
        break;
      default: r = _mm256_add_ps(x, y);
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  if (i < n) dispatch16<h2f, f2h>(out + i, a + i, b + i, n - i, op);
}

bool have_f16c() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return yes;
}
#else
void reduce_f16_f16c(void*, const void*, const void*, size_t, pg_reduce_op_t) {}
bool have_f16c() { return false; }
#endif

UCX_KERNEL_CLONES void reduce_f16(void* o, const void* a, const void* b, size_t n,
                                  pg_reduce_op_t op) {
  if (have_f16c()) return reduce_f16_f16c(o, a, b, n, op);
  dispatch16<h2f, f2h>(o, a, b, n, op);
}
UCX_KERNEL_CLONES void reduce_bf16(void* o, const void* a, const void* b, size_t n,
                                   pg_reduce_op_t op) {
  dispatch16<b2f, f2b>(o, a, b, n, op);
}
UCX_KERNEL_CLONES void reduce_i8(void* o, const void* a, const void* b, size_t n,
                                 pg_reduce_op_t op) {
  dispatch<int8_t>(o, a, b, n, op);
}
UCX_KERNEL_CLONES void reduce_u8(void* o, const void* a, const void* b, size_t n,
                                 pg_reduce_op_t op) {
  dispatch<uint8_t>(o, a, b, n, op);
}
UCX_KERNEL_CLONES void reduce_i32(void* o, const void* a, const void* b, size_t n,
                                  pg_reduce_op_t op) {
  dispatch<int32_t>(o, a, b, n, op);
}
UCX_KERNEL_CLONES void reduce_i64(void* o, const void* a, const void* b, size_t n,
                                  pg_reduce_op_t op) {
  dispatch<int64_t>(o, a, b, n, op);
}

template <class T>
[[gnu::always_inline]] inline void scale_loop(void* data_v, size_t n, uint64_t divisor) {
  T* data = static_cast<T*>(data_v);
  if constexpr (std::is_floating_point_v<T>) {
    const T inv = T{1} / static_cast<T>(divisor);
    for (size_t i = 0; i < n; ++i) data[i] *= inv;
  } else {
    // Through int64 so a divisor beyond T's range divides (to 0) instead of wrapping.
    const int64_t d = static_cast<int64_t>(divisor);
    for (size_t i = 0; i < n; ++i) data[i] = static_cast<T>(static_cast<int64_t>(data[i]) / d);
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

UCX_KERNEL_CLONES void scale_any(void* data, size_t n, pg_dtype_t dtype, uint64_t divisor) {
  switch (dtype) {
    case PG_DTYPE_F32: return scale_loop<float>(data, n, divisor);
    case PG_DTYPE_F64: return scale_loop<double>(data, n, divisor);
    case PG_DTYPE_F16: return scale_loop16<h2f, f2h>(data, n, divisor);
    case PG_DTYPE_BF16: return scale_loop16<b2f, f2b>(data, n, divisor);
    case PG_DTYPE_I8: return scale_loop<int8_t>(data, n, divisor);
    case PG_DTYPE_U8: return scale_loop<uint8_t>(data, n, divisor);
    case PG_DTYPE_I32: return scale_loop<int32_t>(data, n, divisor);
    case PG_DTYPE_I64: return scale_loop<int64_t>(data, n, divisor);
    default: return;
  }
}

}  // namespace

size_t dtype_size(pg_dtype_t dtype) {
  switch (dtype) {
    case PG_DTYPE_F32:
    case PG_DTYPE_I32: return 4;
    case PG_DTYPE_F64:
    case PG_DTYPE_I64: return 8;
    case PG_DTYPE_F16:
    case PG_DTYPE_BF16: return 2;
    case PG_DTYPE_I8:
    case PG_DTYPE_U8: return 1;
    default: return 0;
  }
}

const char* dtype_name(pg_dtype_t dtype) {
  static const char* const kNames[PG_DTYPE_COUNT_] = {"invalid", "f32", "f64", "f16", "bf16",
                                                      "i8",      "u8",  "i32", "i64"};
  return dtype > 0 && dtype < PG_DTYPE_COUNT_ ? kNames[dtype] : "invalid";
}

const char* reduce_op_name(pg_reduce_op_t op) {
  static const char* const kNames[PG_REDUCE_COUNT_] = {"sum", "avg", "prod", "min", "max"};
  return op >= 0 && op < PG_REDUCE_COUNT_ ? kNames[op] : "invalid";
}

void reduce(void* out, const void* a, const void* b, size_t count, pg_dtype_t dtype,
            pg_reduce_op_t op) {
  if (count == 0) return;
  switch (dtype) {
    case PG_DTYPE_F32: return reduce_f32(out, a, b, count, op);
    case PG_DTYPE_F64: return reduce_f64(out, a, b, count, op);
    case PG_DTYPE_F16: return reduce_f16(out, a, b, count, op);
    case PG_DTYPE_BF16: return reduce_bf16(out, a, b, count, op);
    case PG_DTYPE_I8: return reduce_i8(out, a, b, count, op);
    case PG_DTYPE_U8: return reduce_u8(out, a, b, count, op);
    case PG_DTYPE_I32: return reduce_i32(out, a, b, count, op);
    case PG_DTYPE_I64: return reduce_i64(out, a, b, count, op);
    default: return;
  }
}

void scale_down(void* data, size_t count, pg_dtype_t dtype, uint64_t divisor) {
  if (count == 0 || divisor <= 1) return;
  scale_any(data, count, dtype, divisor);
}

float half_to_float(uint16_t h) { return h2f(h); }
uint16_t float_to_half(float f) { return f2h(f); }
float bf16_to_float(uint16_t b) { return b2f(b); }
uint16_t float_to_bf16(float f) { return f2b(f); }

}  // namespace procgroup::ucx_backend
