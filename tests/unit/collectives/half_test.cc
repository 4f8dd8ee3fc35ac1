// f16 (IEEE binary16) and bf16 conversions: exhaustive decoding and round trips, every
// rounding tie between adjacent values, overflow, NaN, subnormals, and random floats
// against the slow reference in half_reference.h.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "collectives/reduce.h"
#include "half_reference.h"

namespace procgroup::detail::testing {
namespace {

bool half_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }
bool bf16_is_nan(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0; }
float bits_float(uint32_t u) { return std::bit_cast<float>(u); }

TEST(Half, DecodesEveryEncoding) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = half_to_float(static_cast<uint16_t>(h));
    const double ref = ref_half_to_double(static_cast<uint16_t>(h));
    if (std::isnan(ref)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << h;
      EXPECT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << h;
    } else {
      EXPECT_EQ(static_cast<double>(f), ref) << std::hex << h;
      EXPECT_EQ(std::signbit(f), (h & 0x8000) != 0) << std::hex << h;  // -0 stays -0
    }
  }
}

TEST(Half, EveryEncodingRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const auto h16 = static_cast<uint16_t>(h);
    const uint16_t back = float_to_half(half_to_float(h16));
    if (half_is_nan(h16)) {
      EXPECT_TRUE(half_is_nan(back)) << std::hex << h << " -> " << back;
      EXPECT_EQ(back & 0x8000, h & 0x8000);
    } else {
      EXPECT_EQ(back, h16) << std::hex << h;
    }
  }
}

// Every midpoint between adjacent non-negative halves (exact in float) must round to the
// even neighbour, and one float ulp either side to the nearer one.
TEST(Half, TiesRoundToEvenAndNeighboursToNearest) {
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const double lo = ref_half_to_double(static_cast<uint16_t>(h));
    const double hi = h == 0x7bff ? 65536.0 : ref_half_to_double(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((lo + hi) / 2);
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);
    const auto even = static_cast<uint16_t>((h & 1) == 0 ? h : h + 1);
    EXPECT_EQ(float_to_half(mid), even) << std::hex << h;
    EXPECT_EQ(float_to_half(-mid), even | 0x8000) << std::hex << h;
    EXPECT_EQ(float_to_half(std::nextafter(mid, 0.0f)), h) << std::hex << h;
    EXPECT_EQ(float_to_half(std::nextafter(mid, 1e9f)), h + 1) << std::hex << h;
  }
}

TEST(Half, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65519.996f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // overflow to Inf at the halfway point
  EXPECT_EQ(float_to_half(1e9f), 0x7c00);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(float_to_half(-1e9f), 0xfc00);
  EXPECT_EQ(float_to_half(inf), 0x7c00);
  EXPECT_EQ(float_to_half(-inf), 0xfc00);
  EXPECT_TRUE(half_is_nan(float_to_half(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(half_is_nan(float_to_half(bits_float(0x7f800001))));  // payload only in low bits
  EXPECT_TRUE(half_is_nan(float_to_half(bits_float(0xffc00000))));
  EXPECT_EQ(float_to_half(0.0f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie -> even
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie -> even
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -14)), 0x0400);             // smallest normal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);             // smallest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);             // tie between 0 and 1 -> 0
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25) * 1.0001f), 0x0001);
  EXPECT_EQ(float_to_half(std::ldexp(3.0f, -25)), 0x0002);  // tie between 1 and 2 -> 2
  EXPECT_EQ(float_to_half(std::ldexp(5.0f, -25)), 0x0002);  // tie between 2 and 3 -> 2
  EXPECT_EQ(float_to_half(-std::ldexp(1.0f, -24)), 0x8001);
  EXPECT_EQ(float_to_half(1e-40f), 0x0000);                    // float subnormal
  EXPECT_EQ(float_to_half(std::ldexp(2047.0f, -25)), 0x0400);  // rounds up into the normals
}

TEST(Half, RandomFloatsMatchReference) {
  uint64_t state = 7;
  for (int i = 0; i < 400000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    auto u = static_cast<uint32_t>(state >> 32);
    // Half of them in (and around) the half range, the rest anywhere.
    if (i % 2 == 0) u = (u & 0x807fffffu) | ((100u + (u >> 23) % 50u) << 23);
    const float f = bits_float(u);
    const uint16_t got = float_to_half(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(half_is_nan(got)) << std::hex << u;
    } else {
      ASSERT_EQ(got, ref_double_to_half(f)) << std::hex << u << " = " << f;
    }
  }
}

TEST(Bf16, DecodesAndRoundTripsEveryEncoding) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const auto b16 = static_cast<uint16_t>(b);
    const float f = bf16_to_float(b16);
    EXPECT_EQ(std::bit_cast<uint32_t>(f), b << 16);
    const uint16_t back = float_to_bf16(f);
    if (bf16_is_nan(b16)) {
      EXPECT_TRUE(bf16_is_nan(back)) << std::hex << b;
    } else {
      EXPECT_EQ(back, b16) << std::hex << b;
    }
  }
}

TEST(Bf16, RoundingAndSpecialValues) {
  EXPECT_EQ(float_to_bf16(bits_float(0x3f808000)), 0x3f80);  // tie -> even
  EXPECT_EQ(float_to_bf16(bits_float(0x3f818000)), 0x3f82);  // tie -> even
  EXPECT_EQ(float_to_bf16(bits_float(0x3f808001)), 0x3f81);
  EXPECT_EQ(float_to_bf16(bits_float(0x3f807fff)), 0x3f80);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // overflow to Inf
  EXPECT_EQ(float_to_bf16(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_EQ(float_to_bf16(bits_float(0x7f7f7fff)), 0x7f7f);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_TRUE(bf16_is_nan(float_to_bf16(bits_float(0x7f800001))));  // would truncate to Inf
  EXPECT_TRUE(bf16_is_nan(float_to_bf16(bits_float(0xff800001))));
  EXPECT_TRUE(bf16_is_nan(float_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(float_to_bf16(bits_float(0x00008000)), 0x0000);  // subnormal tie -> 0
  EXPECT_EQ(float_to_bf16(bits_float(0x00018000)), 0x0002);  // subnormal tie -> even
  EXPECT_EQ(float_to_bf16(bits_float(0x00010001)), 0x0001);
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
}

TEST(Bf16, RandomFloatsMatchReference) {
  uint64_t state = 11;
  for (int i = 0; i < 400000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const float f = bits_float(static_cast<uint32_t>(state >> 32));
    const uint16_t got = float_to_bf16(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(bf16_is_nan(got));
    } else {
      ASSERT_EQ(got, ref_double_to_bf16(f)) << std::hex << std::bit_cast<uint32_t>(f);
    }
  }
}

}  // namespace
}  // namespace procgroup::detail::testing
