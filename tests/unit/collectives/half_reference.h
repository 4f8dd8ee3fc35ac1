// Slow, obviously correct f16/bf16 references for the tests: decoding by the definition
// of the format, and round-to-nearest-even by binary search over the ordered finite
// encodings. Independent of the bit tricks in reduce.cc.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace procgroup::detail::testing {

inline double ref_half_to_double(uint16_t h) {
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  double v = 0;
  if (exp == 0) {
    v = std::ldexp(mant, -24);
  } else if (exp == 31) {
    v = mant != 0 ? std::numeric_limits<double>::quiet_NaN()
                  : std::numeric_limits<double>::infinity();
  } else {
    v = std::ldexp(mant + 1024, exp - 25);
  }
  return (h & 0x8000) != 0 ? -v : v;
}

inline double ref_bf16_to_double(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

// Nearest of the positive encodings 0..max_finite (value() increasing) to a >= 0, ties to
// the even encoding; max_finite + 1 stands for Inf, reached at overflow_value.
template <class Value>
uint16_t ref_round(double a, uint16_t max_finite, double overflow_value, Value value) {
  if (a >= overflow_value) return static_cast<uint16_t>(max_finite + 1);
  uint32_t lo = 0, hi = max_finite;  // largest e with value(e) <= a
  while (lo < hi) {
    const uint32_t mid = (lo + hi + 1) / 2;
    if (value(static_cast<uint16_t>(mid)) <= a)
      lo = mid;
    else
      hi = mid - 1;
  }
  const double below = value(static_cast<uint16_t>(lo));
  if (below == a) return static_cast<uint16_t>(lo);
  const double above = lo == max_finite ? overflow_value : value(static_cast<uint16_t>(lo + 1));
  const double d_below = a - below, d_above = above - a;
  if (d_below < d_above) return static_cast<uint16_t>(lo);
  if (d_above < d_below) return static_cast<uint16_t>(lo + 1);
  return static_cast<uint16_t>((lo & 1) == 0 ? lo : lo + 1);
}

// NaN gives 0x7e00 / 0x7fc0: callers compare NaN-ness, not payloads.
inline uint16_t ref_double_to_half(double x) {
  if (std::isnan(x)) return 0x7e00;
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  // 65504 is the largest half; halfway to the next power of two (65520) rounds to Inf
  // because 0x7c00 is "even", so the Inf candidate sits at 65536.
  return static_cast<uint16_t>(sign | ref_round(std::fabs(x), 0x7bff, 65536.0, ref_half_to_double));
}

inline uint16_t ref_double_to_bf16(double x) {
  if (std::isnan(x)) return 0x7fc0;
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  return static_cast<uint16_t>(
      sign | ref_round(std::fabs(x), 0x7f7f, std::ldexp(1.0, 128), ref_bf16_to_double));
}

}  // namespace procgroup::detail::testing
