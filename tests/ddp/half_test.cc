// float <-> half and bfloat16: exact round trips for every 16-bit pattern, and rounding to
// nearest even checked against a brute-force nearest search over all representable values.
#include "procgroup/ddp/half.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

namespace procgroup::ddp {
namespace {

TEST(DdpHalf, KnownValues) {
  EXPECT_EQ(to_half(1.5f).bits, 0x3e00);
  EXPECT_EQ(to_half(-2.0f).bits, 0xc000);
  EXPECT_EQ(to_half(65504.0f).bits, 0x7bff);
  EXPECT_EQ(to_half(65520.0f).bits, 0x7c00);  // rounds past the largest finite value
  EXPECT_EQ(to_half(std::ldexp(1.0f, -24)).bits, 0x0001);
  EXPECT_EQ(to_half(std::ldexp(1.0f, -25)).bits, 0x0000);  // tie to even (zero)
  EXPECT_EQ(to_half(-0.0f).bits, 0x8000);
  EXPECT_TRUE(std::isnan(to_float(to_half(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(to_float(Half{0x7c00}), std::numeric_limits<float>::infinity());
  EXPECT_EQ(to_bfloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(to_float(BFloat16{0x4049}), 3.140625f);
  EXPECT_TRUE(std::isnan(to_float(to_bfloat16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(DdpHalf, EveryPatternRoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = to_float(Half{static_cast<uint16_t>(b)});
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(to_float(to_half(f)))) << b;
    } else {
      EXPECT_EQ(to_half(f).bits, b) << std::hex << b;
    }
    const float g = to_float(BFloat16{static_cast<uint16_t>(b)});
    if (std::isnan(g)) {
      EXPECT_TRUE(std::isnan(to_float(to_bfloat16(g)))) << b;
    } else {
      EXPECT_EQ(to_bfloat16(g).bits, b) << std::hex << b;
    }
  }
}

// Nearest of the sorted finite values, ties to the even pattern; beyond the top: inf.
uint16_t nearest_half(float x, const std::vector<std::pair<float, uint16_t>>& table) {
  auto hi = std::lower_bound(table.begin(), table.end(), std::make_pair(x, uint16_t{0}),
                             [](auto& a, auto& b) { return a.first < b.first; });
  if (hi == table.end()) {
    // Above the largest finite value: inf once x reaches the midpoint to the next power.
    const float top = table.back().first;
    const float ulp = top - table[table.size() - 2].first;
    return x >= top + ulp / 2 ? uint16_t{0x7c00} : table.back().second;
  }
  if (hi == table.begin() || hi->first == x) return hi->second;
  auto lo = hi - 1;
  const double dl = static_cast<double>(x) - lo->first, dh = hi->first - static_cast<double>(x);
  if (dl < dh) return lo->second;
  if (dh < dl) return hi->second;
  return (lo->second & 1) ? hi->second : lo->second;
}

TEST(DdpHalf, RoundsToNearestEvenLikeABruteForceSearch) {
  std::vector<std::pair<float, uint16_t>> table;
  for (uint32_t b = 0; b < 0x7c00; ++b) table.push_back({to_float(Half{uint16_t(b)}), uint16_t(b)});
  uint64_t z = 1;
  for (int n = 0; n < 200000; ++n) {
    z = z * 6364136223846793005ull + 1442695040888963407ull;
    // Positive floats from 2^-27 up to ~2^17, all mantissas.
    const uint32_t bits =
        0x32000000u + static_cast<uint32_t>((z >> 33) % (0x48000000u - 0x32000000u));
    const float x = std::bit_cast<float>(bits);
    const uint16_t want = nearest_half(x, table);
    ASSERT_EQ(to_half(x).bits, want) << x;
    ASSERT_EQ(to_half(-x).bits, want | 0x8000) << x;
  }
}

TEST(DdpHalf, Bfloat16RoundsToNearestEven) {
  EXPECT_EQ(to_bfloat16(std::bit_cast<float>(0x3f808000u)).bits, 0x3f80);  // tie, even below
  EXPECT_EQ(to_bfloat16(std::bit_cast<float>(0x3f818000u)).bits, 0x3f82);  // tie, even above
  EXPECT_EQ(to_bfloat16(std::bit_cast<float>(0x3f808001u)).bits, 0x3f81);  // above the tie
  EXPECT_EQ(to_bfloat16(std::numeric_limits<float>::max()).bits, 0x7f80);  // rounds to inf
}

}  // namespace
}  // namespace procgroup::ddp
