// half.h — float <-> IEEE half (procgroup::Half) and bfloat16 (procgroup::BFloat16)
// conversions, rounding to nearest even, keeping infinities and NaNs, with subnormals.
// The conversions themselves are the one copy in procgroup/backend_kit/dtype.hpp.
//
//   procgroup::Half h = ddp::to_half(1.5f);      // h.bits == 0x3e00
//   float back = ddp::to_float(h);                // 1.5f
#pragma once

#include <cstdint>

#include "procgroup/procgroup.hpp"
// After procgroup.hpp: dtype.hpp then needs nothing from procgroup_backend.h.
#include "procgroup/backend_kit/dtype.hpp"

namespace procgroup::ddp {

inline float to_float(BFloat16 h) { return kit::bf16_to_float(h.bits); }
inline BFloat16 to_bfloat16(float f) { return {kit::float_to_bf16(f)}; }
inline float to_float(Half h) { return kit::half_to_float(h.bits); }
inline Half to_half(float f) { return {kit::float_to_half(f)}; }

}  // namespace procgroup::ddp
