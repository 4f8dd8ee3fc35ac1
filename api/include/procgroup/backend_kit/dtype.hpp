// backend_kit/dtype.hpp — facts about the ABI's enumerations (element sizes, printable
// names) and the one copy of the f16/bf16 <-> float converters, for the core, the plugins
// and anything else that handles typed buffers. Header-only, C++20, no state.
//
//   size_t bytes = procgroup::kit::dtype_size(buffer.dtype) * buffer.count;   // 0: invalid
//   float x = procgroup::kit::half_to_float(bits);   // exact
//   uint16_t h = procgroup::kit::float_to_half(x);  // round to nearest even, NaN stays NaN
//
// Only the common-types block (pg_dtype_t, pg_reduce_op_t, ...) is needed, which
// procgroup.h and procgroup_backend.h both carry byte for byte: code that knows only
// procgroup.h (ddp, tools) includes that first and gets no backend declarations from here.
#ifndef PROCGROUP_BACKEND_KIT_DTYPE_HPP_
#define PROCGROUP_BACKEND_KIT_DTYPE_HPP_

#ifndef PG_COMMON_TYPES_V1
#include "procgroup/procgroup_backend.h"
#endif

#include <bit>
#include <cstddef>
#include <cstdint>

namespace procgroup::kit {

// Bytes per element; 0 for an invalid dtype.
constexpr size_t dtype_size(pg_dtype_t dtype) {
  switch (dtype) {
    case PG_DTYPE_I8:
    case PG_DTYPE_U8: return 1;
    case PG_DTYPE_F16:
    case PG_DTYPE_BF16: return 2;
    case PG_DTYPE_F32:
    case PG_DTYPE_I32: return 4;
    case PG_DTYPE_F64:
    case PG_DTYPE_I64: return 8;
    default: return 0;
  }
}

constexpr bool dtype_valid(pg_dtype_t dtype) { return dtype_size(dtype) != 0; }

constexpr bool dtype_is_floating(pg_dtype_t dtype) {
  return dtype == PG_DTYPE_F32 || dtype == PG_DTYPE_F64 || dtype == PG_DTYPE_F16 ||
         dtype == PG_DTYPE_BF16;
}

// "f32", "bf16", ...; "invalid" otherwise. Static storage.
constexpr const char* dtype_name(pg_dtype_t dtype) {
  switch (dtype) {
    case PG_DTYPE_F32: return "f32";
    case PG_DTYPE_F64: return "f64";
    case PG_DTYPE_F16: return "f16";
    case PG_DTYPE_BF16: return "bf16";
    case PG_DTYPE_I8: return "i8";
    case PG_DTYPE_U8: return "u8";
    case PG_DTYPE_I32: return "i32";
    case PG_DTYPE_I64: return "i64";
    default: return "invalid";
  }
}

constexpr bool reduce_op_valid(pg_reduce_op_t op) { return op >= 0 && op < PG_REDUCE_COUNT_; }

// "sum", "avg", ...; "invalid" otherwise.
constexpr const char* reduce_op_name(pg_reduce_op_t op) {
  switch (op) {
    case PG_REDUCE_SUM: return "sum";
    case PG_REDUCE_AVG: return "avg";
    case PG_REDUCE_PROD: return "prod";
    case PG_REDUCE_MIN: return "min";
    case PG_REDUCE_MAX: return "max";
    default: return "invalid";
  }
}

// "cpu", "cuda"; "invalid" otherwise.
constexpr const char* device_name(pg_device_type_t device) {
  switch (device) {
    case PG_DEVICE_CPU: return "cpu";
    case PG_DEVICE_CUDA: return "cuda";
    default: return "invalid";
  }
}

// The converters are branch-free (selects only) so that element loops over them vectorise.

// IEEE half bits -> float, exact (subnormals, infinities and NaN payloads kept).
constexpr float half_to_float(uint16_t h) {
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

// float -> IEEE half bits, rounding to nearest even; overflow gives Inf, NaN stays a quiet NaN.
constexpr uint16_t float_to_half(float f) {
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

// bfloat16 bits -> float, exact.
constexpr float bf16_to_float(uint16_t b) { return std::bit_cast<float>(uint32_t{b} << 16); }

// float -> bfloat16 bits, rounding to nearest even; NaN stays a quiet NaN.
constexpr uint16_t float_to_bf16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  // Truncating a NaN could clear every payload bit left and turn it into Inf: force quiet.
  const uint32_t nan = (u >> 16) | 0x40u;
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

}  // namespace procgroup::kit

#endif  // PROCGROUP_BACKEND_KIT_DTYPE_HPP_
