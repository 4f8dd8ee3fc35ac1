// Reduction kernels. Each is a plain element loop the compiler vectorises (this file is
// built with -O3 outside Debug); f16/bf16 go through small float blocks on the stack. The
// conversions are branch-free (selects only) for the same reason, and live here rather than
// in their own file so they inline into the block loops.
#include "collectives/reduce.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "common/dtype.h"

namespace procgroup::detail {
namespace {

inline float h2f(uint16_t h) {
  // Move exponent and mantissa into float position and rebias; Inf/NaN need the exponent
  // pushed to 255, and subnormals are renormalised exactly by one float subtraction.
  constexpr uint32_t kShiftedExp = 0x7c00u << 13;
  constexpr float kMagic = std::bit_cast<float>(113u << 23);  // 2^-14
  uint32_t o = (uint32_t{h} & 0x7fffu) << 13;
  const uint32_t exp = o & kShiftedExp;
  o += (127u - 15u) << 23;
  const uint32_t inf_nan = o + ((128u - 16u) << 23);
  const uint32_t sub = std::bit_cast<uint32_t>(std::bit_cast<float>(o + (1u << 23)) - kMagic);
  o = exp == kShiftedExp ? inf_nan : (exp == 0 ? sub : o);
  return std::bit_cast<float>(o | ((uint32_t{h} & 0x8000u) << 16));
}

inline uint16_t f2h(float f) {
  constexpr uint32_t kF32Inf = 255u << 23;
  constexpr uint32_t kF16Overflow = (127u + 16u) << 23;  // 2^16: rounds to Inf or is Inf/NaN
  constexpr uint32_t kMinNormal = 113u << 23;            // 2^-14, smallest normal half
  // Adding 0.5 lines the 10 subnormal mantissa bits up with the bottom of the float's
  // mantissa, so the float adder's own round-to-nearest-even does the rounding.
  constexpr uint32_t kDenormMagic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  // NaN: keep the top payload bits and force quiet, so a NaN never becomes Inf.
  const uint32_t special = u > kF32Inf ? (0x7e00u | ((u >> 13) & 0x3ffu)) : 0x7c00u;
  const uint32_t sub =
      std::bit_cast<uint32_t>(std::bit_cast<float>(u) + std::bit_cast<float>(kDenormMagic)) -
      kDenormMagic;
  // Normal: rebias and round half to even (0xfff plus the result's low bit); a carry out of
  // the mantissa correctly bumps the exponent, up to Inf.
  const uint32_t normal = (u + ((15u - 127u) << 23) + 0xfffu + ((u >> 13) & 1u)) >> 13;
  const uint32_t o = u >= kF16Overflow ? special : (u < kMinNormal ? sub : normal);
  return static_cast<uint16_t>(o | (sign >> 16));
}

inline float b2f(uint16_t b) { return std::bit_cast<float>(uint32_t{b} << 16); }

inline uint16_t f2b(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  // Truncating a NaN could clear every payload bit left and turn it into Inf: force quiet.
  const uint32_t nan = (u >> 16) | 0x40u;
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

// Integer sum and product wrap modulo 2^bits: computed in the unsigned type (no UB), and
// the conversion back is modular in C++20.
template <class T>
struct SumOp {
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    } else {
      return a + b;
    }
  }
};

template <class T>
struct ProdOp {
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      // uint8_t promotes to int, where 255 * 255 still fits; wider types stay unsigned.
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
    } else {
      return a * b;
    }
  }
};

// Floating min/max propagate NaN (as torch.minimum does), so a NaN gradient is never
// silently dropped. Ties (+0 vs -0) keep the left operand; callers fix the order.
template <class T>
struct MinOp {
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return (b < a || b != b) ? b : a;
    } else {
      return b < a ? b : a;
    }
  }
};

template <class T>
struct MaxOp {
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return (b > a || b != b) ? b : a;
    } else {
      return b > a ? b : a;
    }
  }
};

template <class T, template <class> class Op>
void reduce_loop(void* inout_v, const void* in_v, uint64_t count) {
  T* inout = static_cast<T*>(inout_v);
  const T* in = static_cast<const T*>(in_v);
  for (uint64_t i = 0; i < count; ++i) inout[i] = Op<T>::apply(inout[i], in[i]);
}

// 16-bit floats: widen a block of each operand into stack floats, reduce there, round
// back once. Each step is its own simple loop so each vectorises.
constexpr uint64_t kBlock = 512;

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float), template <class> class Op>
void reduce_loop_16(void* inout_v, const void* in_v, uint64_t count) {
  auto* inout = static_cast<uint16_t*>(inout_v);
  const auto* in = static_cast<const uint16_t*>(in_v);
  alignas(64) float a[kBlock];
  alignas(64) float b[kBlock];
  for (uint64_t base = 0; base < count; base += kBlock) {
    const uint64_t m = std::min(kBlock, count - base);
    for (uint64_t i = 0; i < m; ++i) a[i] = ToFloat(inout[base + i]);
    for (uint64_t i = 0; i < m; ++i) b[i] = ToFloat(in[base + i]);
    for (uint64_t i = 0; i < m; ++i) a[i] = Op<float>::apply(a[i], b[i]);
    for (uint64_t i = 0; i < m; ++i) inout[base + i] = FromFloat(a[i]);
  }
}

using Kernel = void (*)(void*, const void*, uint64_t);

template <template <class> class Op>
Kernel kernel_for(pg_dtype_t dtype) {
  switch (dtype) {
    case PG_DTYPE_F32: return &reduce_loop<float, Op>;
    case PG_DTYPE_F64: return &reduce_loop<double, Op>;
    case PG_DTYPE_F16: return &reduce_loop_16<h2f, f2h, Op>;
    case PG_DTYPE_BF16: return &reduce_loop_16<b2f, f2b, Op>;
    case PG_DTYPE_I8: return &reduce_loop<int8_t, Op>;
    case PG_DTYPE_U8: return &reduce_loop<uint8_t, Op>;
    case PG_DTYPE_I32: return &reduce_loop<int32_t, Op>;
    case PG_DTYPE_I64: return &reduce_loop<int64_t, Op>;
    default: return nullptr;
  }
}

template <class T>
void scale_float(void* data_v, uint64_t count, uint64_t divisor) {
  T* data = static_cast<T*>(data_v);
  const T inv = T{1} / static_cast<T>(divisor);
  for (uint64_t i = 0; i < count; ++i) data[i] *= inv;
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void scale_16(void* data_v, uint64_t count, uint64_t divisor) {
  auto* data = static_cast<uint16_t*>(data_v);
  const float inv = 1.0f / static_cast<float>(divisor);
  for (uint64_t i = 0; i < count; ++i) data[i] = FromFloat(ToFloat(data[i]) * inv);
}

template <class T>
void scale_int(void* data_v, uint64_t count, uint64_t divisor) {
  T* data = static_cast<T*>(data_v);
  if constexpr (std::is_signed_v<T>) {
    // Every |value| < 2^63 <= a divisor this large, so truncation gives 0 (and the divisor
    // would not fit the signed type).
    if (divisor > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      std::memset(data, 0, count * sizeof(T));
      return;
    }
    const auto d = static_cast<int64_t>(divisor);
    for (uint64_t i = 0; i < count; ++i) data[i] = static_cast<T>(int64_t{data[i]} / d);
  } else {
    for (uint64_t i = 0; i < count; ++i) data[i] = static_cast<T>(uint64_t{data[i]} / divisor);
  }
}

}  // namespace

float half_to_float(uint16_t h) { return h2f(h); }
uint16_t float_to_half(float f) { return f2h(f); }
float bf16_to_float(uint16_t b) { return b2f(b); }
uint16_t float_to_bf16(float f) { return f2b(f); }

Status reduce_into(void* inout, const void* in, uint64_t count, pg_dtype_t dtype,
                   pg_reduce_op_t op) {
  Kernel kernel = nullptr;
  switch (op) {
    case PG_REDUCE_SUM:
    case PG_REDUCE_AVG: kernel = kernel_for<SumOp>(dtype); break;
    case PG_REDUCE_PROD: kernel = kernel_for<ProdOp>(dtype); break;
    case PG_REDUCE_MIN: kernel = kernel_for<MinOp>(dtype); break;
    case PG_REDUCE_MAX: kernel = kernel_for<MaxOp>(dtype); break;
    default: return make_error(PG_ERR_INVALID_ARGUMENT, "reduce: invalid reduce op {}", op);
  }
  if (kernel == nullptr) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "reduce: invalid dtype {}", dtype);
  }
  if (count == 0) return ok_status();
  if (inout == nullptr || in == nullptr) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "reduce: null buffer for {} elements", count);
  }
  kernel(inout, in, count);
  return ok_status();
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
  switch (dtype) {
    case PG_DTYPE_F32: scale_float<float>(data, count, divisor); break;
    case PG_DTYPE_F64: scale_float<double>(data, count, divisor); break;
    case PG_DTYPE_F16: scale_16<h2f, f2h>(data, count, divisor); break;
    case PG_DTYPE_BF16: scale_16<b2f, f2b>(data, count, divisor); break;
    case PG_DTYPE_I8: scale_int<int8_t>(data, count, divisor); break;
    case PG_DTYPE_U8: scale_int<uint8_t>(data, count, divisor); break;
    case PG_DTYPE_I32: scale_int<int32_t>(data, count, divisor); break;
    case PG_DTYPE_I64: scale_int<int64_t>(data, count, divisor); break;
    default: break;  // unreachable: dtype_valid() above
  }
  return ok_status();
}

}  // namespace procgroup::detail
