// Reduction kernels against a scalar reference, and scale_down. 16-bit floats are checked
// against a correctly rounded result computed independently (double arithmetic, then the
// nearest representable value found by search in a table of all 65536 encodings). Counts
// cover the vector bodies and tails of every kernel (AVX-512, AVX2/F16C, the f16 blocks).
#include "collectives/reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "common/dtype.h"
#include "half_reference.h"
#include "test_data.h"

namespace procgroup::detail::testing {
namespace {

// Counts around the vector widths (4..64 bytes) and the 512-element f16 block.
constexpr uint64_t kKernelCounts[] = {0,  1,  2,  3,   7,   8,   15,  16,   17,  31,
                                      33, 63, 65, 100, 511, 512, 513, 1031, 4099};

uint64_t next(uint64_t& state) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return state >> 16;
}

// An arbitrary element of dtype as raw bits (integers across their whole range; floats
// finite, of varied magnitude and sign, with some exact ties and equal values).
void random_element(pg_dtype_t dtype, void* data, uint64_t i, uint64_t& state) {
  const uint64_t bits = next(state);
  const size_t elem = dtype_size(dtype);
  uint8_t* p = static_cast<uint8_t*>(data) + i * elem;
  switch (dtype) {
    case PG_DTYPE_F32: {
      const float v = static_cast<float>(static_cast<int64_t>(bits % 2001) - 1000) / 64.0f *
                      std::ldexp(1.0f, static_cast<int>(bits >> 20) % 9 - 4);
      std::memcpy(p, &v, 4);
      break;
    }
    case PG_DTYPE_F64: {
      const double v = (static_cast<double>(bits % 200001) - 100000) / 3.0;
      std::memcpy(p, &v, 8);
      break;
    }
    case PG_DTYPE_F16:
    case PG_DTYPE_BF16: {
      // Any finite encoding (half of the exponent range, to keep products finite).
      uint16_t h = static_cast<uint16_t>(bits);
      if (dtype == PG_DTYPE_F16)
        h = static_cast<uint16_t>((h & 0x83ff) | ((h >> 10) % 24 + 4) << 10);
      else
        h = static_cast<uint16_t>((h & 0x807f) | ((h >> 7) % 120 + 68) << 7);
      std::memcpy(p, &h, 2);
      break;
    }
    default: std::memcpy(p, &bits, elem); break;  // integers: all bit patterns
  }
}

template <class T>
T typed(const Bytes& b, size_t i) {
  T v;
  std::memcpy(&v, &b[i * sizeof(T)], sizeof(T));
  return v;
}

// Integers: sum and product modulo 2^64 (then truncated to the type: modulo 2^bits).
template <class T>
void reference_int(pg_reduce_op_t op, const Bytes& x, const Bytes& y, Bytes& out) {
  for (size_t i = 0; i < x.size() / sizeof(T); ++i) {
    const T a = typed<T>(x, i), b = typed<T>(y, i);
    const auto ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
    T r{};
    switch (op) {
      case PG_REDUCE_SUM:
      case PG_REDUCE_AVG: r = static_cast<T>(ua + ub); break;
      case PG_REDUCE_PROD: r = static_cast<T>(ua * ub); break;
      case PG_REDUCE_MIN: r = b < a ? b : a; break;
      case PG_REDUCE_MAX: r = b > a ? b : a; break;
      default: break;
    }
    std::memcpy(&out[i * sizeof(T)], &r, sizeof(T));
  }
}

// The scalar reference. Floats: the exact result in double (sums and products of these
// operands are exact there), rounded once to the dtype.
Bytes reference(pg_dtype_t dtype, pg_reduce_op_t op, const Bytes& x, const Bytes& y) {
  Bytes out(x.size());
  switch (dtype) {
    case PG_DTYPE_I8: reference_int<int8_t>(op, x, y, out); return out;
    case PG_DTYPE_U8: reference_int<uint8_t>(op, x, y, out); return out;
    case PG_DTYPE_I32: reference_int<int32_t>(op, x, y, out); return out;
    case PG_DTYPE_I64: reference_int<int64_t>(op, x, y, out); return out;
    default: break;
  }
  const size_t elem = dtype_size(dtype);
  for (size_t i = 0; i < x.size() / elem; ++i) {
    const double a = load(dtype, x.data(), i), b = load(dtype, y.data(), i);
    double r = 0;
    switch (op) {
      case PG_REDUCE_SUM:
      case PG_REDUCE_AVG: r = a + b; break;
      case PG_REDUCE_PROD: r = a * b; break;
      case PG_REDUCE_MIN: r = b < a ? b : a; break;
      case PG_REDUCE_MAX: r = b > a ? b : a; break;
      default: break;
    }
    uint16_t h = 0;
    switch (dtype) {
      case PG_DTYPE_F16: h = ref_double_to_half(r); break;
      case PG_DTYPE_BF16: h = ref_double_to_bf16(r); break;
      default: store(dtype, out.data(), i, r); continue;  // f32: one rounding; f64: exact op
    }
    std::memcpy(&out[i * 2], &h, 2);
  }
  return out;
}

// reduce_to(out, a, b) gives the same bytes as reduce_into(a, b) wherever out is: a third
// buffer, a (in place) or b (the other operand's place, a still on the left).
void expect_reduce_to_agrees(pg_dtype_t dtype, pg_reduce_op_t op, uint64_t count, const Bytes& x,
                             const Bytes& y, const Bytes& expected) {
  Bytes out(x.size(), 0xCD), into_b = y;
  ASSERT_TRUE(reduce_to(out.data(), x.data(), y.data(), count, dtype, op).ok());
  ASSERT_TRUE(reduce_to(into_b.data(), x.data(), into_b.data(), count, dtype, op).ok());
  EXPECT_EQ(out, expected) << describe(dtype, op) << " count " << count << " (third buffer)";
  EXPECT_EQ(into_b, expected) << describe(dtype, op) << " count " << count << " (out == b)";
}

TEST(ReduceInto, EveryDtypeAndOpMatchesScalarReference) {
  uint64_t state = 12345;
  for (pg_dtype_t dtype : kAllDtypes) {
    const size_t elem = dtype_size(dtype);
    for (pg_reduce_op_t op : kAllOps) {
      for (uint64_t count : kKernelCounts) {
        Bytes x(count * elem), y(count * elem);
        for (uint64_t i = 0; i < count; ++i) {
          random_element(dtype, x.data(), i, state);
          random_element(dtype, y.data(), i, state);
          if (i % 5 == 0) std::memcpy(&y[i * elem], &x[i * elem], elem);  // equal operands
        }
        const Bytes expected = reference(dtype, op, x, y);
        expect_reduce_to_agrees(dtype, op, count, x, y, expected);
        const Bytes y_before = y;
        ASSERT_TRUE(reduce_into(x.data(), y.data(), count, dtype, op).ok());
        EXPECT_EQ(y, y_before) << "the input operand was modified";
        for (uint64_t i = 0; i < count; ++i) {
          ASSERT_EQ(0, std::memcmp(&expected[i * elem], &x[i * elem], elem))
              << describe(dtype, op) << " count " << count << " element " << i << ": expected "
              << load(dtype, expected.data(), i) << " got " << load(dtype, x.data(), i);
        }
      }
    }
  }
}

TEST(ReduceInto, IntegerOverflowWraps) {
  int8_t a[3] = {127, -128, 100};
  const int8_t b[3] = {1, -1, 3};
  ASSERT_TRUE(reduce_into(a, b, 3, PG_DTYPE_I8, PG_REDUCE_SUM).ok());
  EXPECT_EQ(a[0], -128);
  EXPECT_EQ(a[1], 127);
  EXPECT_EQ(a[2], 103);
  int64_t c[2] = {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
  const int64_t d[2] = {2, -1};
  ASSERT_TRUE(reduce_into(c, d, 2, PG_DTYPE_I64, PG_REDUCE_PROD).ok());
  EXPECT_EQ(c[0], -2);
  EXPECT_EQ(c[1], std::numeric_limits<int64_t>::min());
  uint8_t e[1] = {255};
  const uint8_t f[1] = {255};
  ASSERT_TRUE(reduce_into(e, f, 1, PG_DTYPE_U8, PG_REDUCE_PROD).ok());
  EXPECT_EQ(e[0], 1);
}

TEST(ReduceInto, MinMaxPropagateNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (pg_reduce_op_t op : {PG_REDUCE_MIN, PG_REDUCE_MAX}) {
    float a[4] = {nan, 1.0f, nan, 2.0f};
    const float b[4] = {1.0f, nan, nan, 3.0f};
    ASSERT_TRUE(reduce_into(a, b, 4, PG_DTYPE_F32, op).ok());
    EXPECT_TRUE(std::isnan(a[0]) && std::isnan(a[1]) && std::isnan(a[2]));
    EXPECT_EQ(a[3], op == PG_REDUCE_MIN ? 2.0f : 3.0f);
    uint16_t h[2] = {float_to_half(nan), float_to_half(1.0f)};
    const uint16_t g[2] = {float_to_half(1.0f), float_to_half(nan)};
    ASSERT_TRUE(reduce_into(h, g, 2, PG_DTYPE_F16, op).ok());
    EXPECT_TRUE(std::isnan(half_to_float(h[0])) && std::isnan(half_to_float(h[1])));
  }
}

// The left operand wins ties, so the order ranks combine in decides +0 vs -0, in the vector
// body and in the tail, for every floating dtype and every aliasing.
TEST(ReduceTo, MinMaxTiesKeepTheLeftOperand) {
  constexpr uint64_t kCount = 37;
  for (pg_dtype_t dtype : {PG_DTYPE_F32, PG_DTYPE_F64, PG_DTYPE_F16, PG_DTYPE_BF16}) {
    const size_t elem = dtype_size(dtype);
    Bytes plus(kCount * elem), minus(kCount * elem);
    for (uint64_t i = 0; i < kCount; ++i) {
      store(dtype, plus.data(), i, 0.0);
      store(dtype, minus.data(), i, -0.0);
    }
    for (pg_reduce_op_t op : {PG_REDUCE_MIN, PG_REDUCE_MAX}) {
      Bytes out(plus.size()), in_b = minus, in_a = plus;
      ASSERT_TRUE(reduce_to(out.data(), plus.data(), minus.data(), kCount, dtype, op).ok());
      ASSERT_TRUE(reduce_to(in_b.data(), plus.data(), in_b.data(), kCount, dtype, op).ok());
      ASSERT_TRUE(reduce_to(in_a.data(), in_a.data(), minus.data(), kCount, dtype, op).ok());
      EXPECT_EQ(out, plus) << describe(dtype, op);
      EXPECT_EQ(in_b, plus) << describe(dtype, op);
      EXPECT_EQ(in_a, plus) << describe(dtype, op);
      ASSERT_TRUE(reduce_to(out.data(), minus.data(), plus.data(), kCount, dtype, op).ok());
      EXPECT_EQ(out, minus) << describe(dtype, op);
    }
  }
}

// NaN in either operand, in the F16C body (8 at a time) and the scalar tail, for f16 and bf16.
TEST(ReduceTo, HalfTypesPropagateNanInBodyAndTail) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  constexpr uint64_t kCount = 19;
  for (pg_dtype_t dtype : {PG_DTYPE_F16, PG_DTYPE_BF16}) {
    Bytes a(kCount * 2), b(kCount * 2), out(kCount * 2);
    for (uint64_t i = 0; i < kCount; ++i) {
      store(dtype, a.data(), i, i % 3 == 0 ? nan : 1.0);
      store(dtype, b.data(), i, i % 3 == 1 ? nan : (i % 2 ? 3.0 : -1.0));
    }
    for (pg_reduce_op_t op : kAllOps) {
      ASSERT_TRUE(reduce_to(out.data(), a.data(), b.data(), kCount, dtype, op).ok());
      for (uint64_t i = 0; i < kCount; ++i) {
        const double x = load(dtype, a.data(), i), y = load(dtype, b.data(), i);
        const double got = load(dtype, out.data(), i);
        if (std::isnan(x) || std::isnan(y)) {
          EXPECT_TRUE(std::isnan(got)) << describe(dtype, op) << " element " << i;
          continue;
        }
        const double want = op == PG_REDUCE_MIN   ? std::min(x, y)
                            : op == PG_REDUCE_MAX ? std::max(x, y)
                            : op == PG_REDUCE_PROD ? x * y
                                                   : x + y;
        EXPECT_EQ(got, want) << describe(dtype, op) << " element " << i;
      }
    }
  }
}

TEST(ReduceTo, InvalidArguments) {
  float a[1] = {1}, b[1] = {2}, out[1] = {7};
  EXPECT_EQ(reduce_to(out, a, b, 1, PG_DTYPE_INVALID, PG_REDUCE_SUM).code(),
            PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(reduce_to(out, a, b, 1, PG_DTYPE_F32, PG_REDUCE_COUNT_).code(),
            PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(reduce_to(nullptr, a, b, 1, PG_DTYPE_F32, PG_REDUCE_SUM).code(),
            PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(reduce_to(out, a, nullptr, 1, PG_DTYPE_F32, PG_REDUCE_SUM).code(),
            PG_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(reduce_to(nullptr, nullptr, nullptr, 0, PG_DTYPE_F32, PG_REDUCE_SUM).ok());
  EXPECT_EQ(out[0], 7.0f);
}

TEST(ReduceInto, InvalidDtypeOrOp) {
  float a[1] = {1}, b[1] = {2};
  EXPECT_EQ(reduce_into(a, b, 1, PG_DTYPE_INVALID, PG_REDUCE_SUM).code(), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(reduce_into(a, b, 1, PG_DTYPE_COUNT_, PG_REDUCE_SUM).code(), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(reduce_into(a, b, 1, PG_DTYPE_F32, PG_REDUCE_COUNT_).code(), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(reduce_into(a, b, 1, PG_DTYPE_F32, -1).code(), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(reduce_into(nullptr, b, 1, PG_DTYPE_F32, PG_REDUCE_SUM).code(),
            PG_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(reduce_into(nullptr, nullptr, 0, PG_DTYPE_F32, PG_REDUCE_SUM).ok());
  EXPECT_EQ(a[0], 1.0f);
}

TEST(ScaleDown, FloatsMultiplyByReciprocalInWorkingPrecision) {
  for (uint64_t divisor : {1u, 2u, 3u, 7u, 10u}) {
    std::vector<float> f(37);
    std::vector<double> d(37);
    std::vector<uint16_t> h(37), b(37);
    for (size_t i = 0; i < f.size(); ++i) {
      f[i] = static_cast<float>(i) * 1.37f - 20.0f;
      d[i] = static_cast<double>(i) * 1.37 - 20.0;
      h[i] = float_to_half(f[i]);
      b[i] = float_to_bf16(f[i]);
    }
    const std::vector<float> f0 = f;
    const std::vector<double> d0 = d;
    const std::vector<uint16_t> h0 = h, b0 = b;
    ASSERT_TRUE(scale_down(f.data(), f.size(), PG_DTYPE_F32, divisor).ok());
    ASSERT_TRUE(scale_down(d.data(), d.size(), PG_DTYPE_F64, divisor).ok());
    ASSERT_TRUE(scale_down(h.data(), h.size(), PG_DTYPE_F16, divisor).ok());
    ASSERT_TRUE(scale_down(b.data(), b.size(), PG_DTYPE_BF16, divisor).ok());
    const float inv = 1.0f / static_cast<float>(divisor);
    for (size_t i = 0; i < f.size(); ++i) {
      EXPECT_EQ(f[i], f0[i] * inv) << divisor;
      EXPECT_EQ(d[i], d0[i] * (1.0 / static_cast<double>(divisor))) << divisor;
      // One float multiply of exactly representable operands, then one rounding.
      EXPECT_EQ(h[i], ref_double_to_half(static_cast<double>(half_to_float(h0[i]) * inv)));
      EXPECT_EQ(b[i], ref_double_to_bf16(static_cast<double>(bf16_to_float(b0[i]) * inv)));
      EXPECT_NEAR(f[i], f0[i] / static_cast<float>(divisor), 1e-5);
    }
  }
}

TEST(ScaleDown, IntegersTruncateTowardZero) {
  int8_t i8[4] = {-128, 127, -7, 7};
  ASSERT_TRUE(scale_down(i8, 4, PG_DTYPE_I8, 3).ok());
  EXPECT_EQ(i8[0], -42);
  EXPECT_EQ(i8[1], 42);
  EXPECT_EQ(i8[2], -2);
  EXPECT_EQ(i8[3], 2);
  uint8_t u8[2] = {255, 5};
  ASSERT_TRUE(scale_down(u8, 2, PG_DTYPE_U8, 2).ok());
  EXPECT_EQ(u8[0], 127);
  EXPECT_EQ(u8[1], 2);
  int32_t i32[2] = {-9, 2147483647};
  ASSERT_TRUE(scale_down(i32, 2, PG_DTYPE_I32, 4).ok());
  EXPECT_EQ(i32[0], -2);
  EXPECT_EQ(i32[1], 536870911);
  int64_t i64[2] = {std::numeric_limits<int64_t>::min(), -5};
  ASSERT_TRUE(scale_down(i64, 2, PG_DTYPE_I64, 2).ok());
  EXPECT_EQ(i64[0], std::numeric_limits<int64_t>::min() / 2);
  EXPECT_EQ(i64[1], -2);
  int64_t big[1] = {std::numeric_limits<int64_t>::min()};
  ASSERT_TRUE(scale_down(big, 1, PG_DTYPE_I64, uint64_t{1} << 63).ok());
  EXPECT_EQ(big[0], 0);
}

// 8- and 32-bit integers divide through double (vectorised): exact against integer division
// for every i8/u8 value and i32 extremes, with divisors up to and beyond the type's range.
TEST(ScaleDown, IntegersThroughDoubleMatchIntegerDivision) {
  const uint64_t divisors[] = {2, 3, 7, 127, 128, 255, 256, 1000, 65537, 2147483647,
                               2147483648, uint64_t{1} << 40, (uint64_t{1} << 63) + 1};
  std::vector<int64_t> values;
  for (int v = -128; v < 256; ++v) values.push_back(v);
  for (int64_t v : {int64_t{INT32_MIN}, int64_t{INT32_MIN} + 1, int64_t{INT32_MAX},
                    int64_t{INT32_MAX} - 1, int64_t{1} << 30, -(int64_t{1} << 30) - 7})
    values.push_back(v);
  for (uint64_t d : divisors) {
    std::vector<int8_t> i8;
    std::vector<uint8_t> u8;
    std::vector<int32_t> i32;
    for (int64_t v : values) {
      if (v >= -128 && v < 128) i8.push_back(static_cast<int8_t>(v));
      if (v >= 0 && v < 256) u8.push_back(static_cast<uint8_t>(v));
      i32.push_back(static_cast<int32_t>(v));
    }
    const auto i8_0 = i8;
    const auto u8_0 = u8;
    const auto i32_0 = i32;
    ASSERT_TRUE(scale_down(i8.data(), i8.size(), PG_DTYPE_I8, d).ok());
    ASSERT_TRUE(scale_down(u8.data(), u8.size(), PG_DTYPE_U8, d).ok());
    ASSERT_TRUE(scale_down(i32.data(), i32.size(), PG_DTYPE_I32, d).ok());
    // |value| < 2^31 < d means 0; otherwise d fits int64.
    auto quotient = [&](int64_t v) { return d > (uint64_t{1} << 62) ? 0 : v / static_cast<int64_t>(d); };
    for (size_t i = 0; i < i8.size(); ++i) ASSERT_EQ(i8[i], quotient(i8_0[i])) << int{i8_0[i]} << "/" << d;
    for (size_t i = 0; i < u8.size(); ++i) ASSERT_EQ(u8[i], quotient(u8_0[i])) << int{u8_0[i]} << "/" << d;
    for (size_t i = 0; i < i32.size(); ++i) ASSERT_EQ(i32[i], quotient(i32_0[i])) << i32_0[i] << "/" << d;
  }
}

TEST(ScaleDown, InvalidArguments) {
  float f[1] = {1};
  EXPECT_EQ(scale_down(f, 1, PG_DTYPE_F32, 0).code(), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(scale_down(f, 1, PG_DTYPE_INVALID, 2).code(), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(scale_down(nullptr, 1, PG_DTYPE_F32, 2).code(), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(f[0], 1.0f);
}

}  // namespace
}  // namespace procgroup::detail::testing
