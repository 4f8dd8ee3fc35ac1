// half.h — float <-> IEEE half (procgroup::Half) and bfloat16 (procgroup::BFloat16)
// conversions, rounding to nearest even, keeping infinities and NaNs, with subnormals.
//
//   procgroup::Half h = ddp::to_half(1.5f);      // h.bits == 0x3e00
//   float back = ddp::to_float(h);                // 1.5f
#pragma once

#include <bit>
#include <cstdint>

#include "procgroup/procgroup.hpp"

namespace procgroup::ddp {

inline float to_float(BFloat16 h) { return std::bit_cast<float>(uint32_t{h.bits} << 16); }

inline BFloat16 to_bfloat16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return {static_cast<uint16_t>((u >> 16) | 0x40)};  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even; overflow carries into inf
  return {static_cast<uint16_t>(u >> 16)};
}

inline float to_float(Half h) {
  const uint32_t sign = uint32_t{h.bits & 0x8000u} << 16;
  const uint32_t exp = (h.bits >> 10) & 0x1fu;
  uint32_t mant = h.bits & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return std::bit_cast<float>(sign);
  // Subnormal half: normalise into a float.
  int e = 113;
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return std::bit_cast<float>(sign | (static_cast<uint32_t>(e) << 23) | ((mant & 0x3ffu) << 13));
}

inline Half to_half(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return {static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu))};
  if (abs >= 0x477ff000u) return {static_cast<uint16_t>(sign | 0x7c00u)};  // rounds past 65504
  if (abs >= 0x38800000u) {                                                // normal half
    uint32_t r = abs - (112u << 23);
    r += 0xfffu + ((r >> 13) & 1u);
    return {static_cast<uint16_t>(sign | (r >> 13))};
  }
  if (abs < 0x33000000u) return {sign};  // below half the smallest subnormal: zero
  // Subnormal half: shift the full mantissa, round to nearest even on the dropped bits.
  const uint32_t exp = abs >> 23;
  const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - exp;  // 14..24
  uint32_t h = mant >> shift;
  const uint32_t rest = mant & ((1u << shift) - 1);
  const uint32_t half_way = 1u << (shift - 1);
  if (rest > half_way || (rest == half_way && (h & 1u))) ++h;
  return {static_cast<uint16_t>(sign | h)};
}

}  // namespace procgroup::ddp
