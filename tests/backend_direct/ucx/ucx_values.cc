// Typed test data and expected results (see ucx_values.h).
#include "ucx_values.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace procgroup::ucx_test {
namespace {

bool is_signed(pg_dtype_t d) { return d != PG_DTYPE_U8; }
bool is_float(pg_dtype_t d) {
  return d == PG_DTYPE_F32 || d == PG_DTYPE_F64 || d == PG_DTYPE_F16 || d == PG_DTYPE_BF16;
}

// Small integers only pass through these, so truncation is exact; AVG results are compared
// with a tolerance, so rounding toward zero on the way in is good enough.
uint16_t to_bf16(double v) {
  return static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(v)) >> 16);
}
double from_bf16(uint16_t b) { return std::bit_cast<float>(uint32_t{b} << 16); }

uint16_t to_f16(double v) {
  const float f = static_cast<float>(v);
  if (f == 0) return std::signbit(f) ? 0x8000 : 0;
  int e = 0;
  const float m = std::frexp(std::fabs(f), &e);  // f = m * 2^e, m in [0.5, 1)
  const uint16_t sign = f < 0 ? 0x8000 : 0;
  const int exp = e - 1 + 15;
  const uint32_t frac = static_cast<uint32_t>(std::ldexp(m * 2 - 1, 10));
  return static_cast<uint16_t>(sign | exp << 10 | frac);
}
double from_f16(uint16_t h) {
  const int exp = (h >> 10) & 31;
  const double frac = h & 1023;
  const double sign = (h & 0x8000) != 0 ? -1 : 1;
  if (exp == 0) return sign * std::ldexp(frac, -24);
  if (exp == 31) return frac != 0 ? NAN : sign * INFINITY;
  return sign * std::ldexp(1 + frac / 1024, exp - 15);
}

}  // namespace

const char* op_label(pg_op_t op) {
  static const char* const kNames[] = {"allreduce",      "broadcast", "reduce",  "allgather",
                                       "reduce_scatter", "gather",    "scatter", "alltoall",
                                       "barrier",        "send",      "recv"};
  return op >= 0 && op < PG_OP_COUNT_ ? kNames[op] : "unknown";
}

const char* dtype_label(pg_dtype_t d) {
  static const char* const kNames[] = {"invalid", "f32", "f64", "f16", "bf16",
                                       "i8",      "u8",  "i32", "i64"};
  return d > 0 && d < PG_DTYPE_COUNT_ ? kNames[d] : "invalid";
}

const char* reduce_label(pg_reduce_op_t op) {
  static const char* const kNames[] = {"sum", "avg", "prod", "min", "max"};
  return op >= 0 && op < PG_REDUCE_COUNT_ ? kNames[op] : "invalid";
}

size_t dtype_bytes(pg_dtype_t d) {
  switch (d) {
    case PG_DTYPE_F64:
    case PG_DTYPE_I64: return 8;
    case PG_DTYPE_F32:
    case PG_DTYPE_I32: return 4;
    case PG_DTYPE_F16:
    case PG_DTYPE_BF16: return 2;
    default: return 1;
  }
}

std::vector<pg_dtype_t> all_dtypes() {
  return {PG_DTYPE_F32, PG_DTYPE_F64, PG_DTYPE_F16, PG_DTYPE_BF16,
          PG_DTYPE_I8,  PG_DTYPE_U8,  PG_DTYPE_I32, PG_DTYPE_I64};
}

std::vector<pg_reduce_op_t> all_reduce_ops() {
  return {PG_REDUCE_SUM, PG_REDUCE_AVG, PG_REDUCE_PROD, PG_REDUCE_MIN, PG_REDUCE_MAX};
}

Typed::Typed(pg_dtype_t dtype, uint64_t count)
    : dtype_(dtype), count_(count), es_(dtype_bytes(dtype)), bytes_(count * es_ + 1) {}

void Typed::fill(double value) {
  for (uint64_t i = 0; i < count_; ++i) set(i, value);
}

void Typed::set(uint64_t i, double v) {
  uint8_t* p = bytes_.data() + i * es_;
  auto put = [&](auto x) { std::memcpy(p, &x, sizeof(x)); };
  switch (dtype_) {
    case PG_DTYPE_F32: return put(static_cast<float>(v));
    case PG_DTYPE_F64: return put(v);
    case PG_DTYPE_F16: return put(to_f16(v));
    case PG_DTYPE_BF16: return put(to_bf16(v));
    case PG_DTYPE_I8: return put(static_cast<int8_t>(v));
    case PG_DTYPE_U8: return put(static_cast<uint8_t>(v));
    case PG_DTYPE_I32: return put(static_cast<int32_t>(v));
    default: return put(static_cast<int64_t>(v));
  }
}

double Typed::get(uint64_t i) const {
  const uint8_t* p = bytes_.data() + i * es_;
  auto take = [&](auto x) {
    std::memcpy(&x, p, sizeof(x));
    return x;
  };
  switch (dtype_) {
    case PG_DTYPE_F32: return take(float{});
    case PG_DTYPE_F64: return take(double{});
    case PG_DTYPE_F16: return from_f16(take(uint16_t{}));
    case PG_DTYPE_BF16: return from_bf16(take(uint16_t{}));
    case PG_DTYPE_I8: return take(int8_t{});
    case PG_DTYPE_U8: return take(uint8_t{});
    case PG_DTYPE_I32: return take(int32_t{});
    default: return static_cast<double>(take(int64_t{}));
  }
}

double contribution(int rank, uint64_t i, pg_reduce_op_t op, pg_dtype_t dtype) {
  switch (op) {
    case PG_REDUCE_PROD: return (i + rank) % 4 == 0 ? 2 : 1;  // at most two 2s in 8 ranks
    case PG_REDUCE_MIN:
    case PG_REDUCE_MAX:
      return static_cast<double>((i * 7 + rank * 3) % 11) - (is_signed(dtype) ? 5 : 0);
    default: return static_cast<double>((i + 2 * rank) % 4);
  }
}

double reduced(int size, uint64_t i, pg_reduce_op_t op, pg_dtype_t dtype) {
  double acc = contribution(0, i, op, dtype);
  for (int r = 1; r < size; ++r) {
    const double v = contribution(r, i, op, dtype);
    switch (op) {
      case PG_REDUCE_PROD: acc *= v; break;
      case PG_REDUCE_MIN: acc = std::min(acc, v); break;
      case PG_REDUCE_MAX: acc = std::max(acc, v); break;
      default: acc += v;
    }
  }
  if (op == PG_REDUCE_AVG) return is_float(dtype) ? acc / size : std::trunc(acc / size);
  return acc;
}

double payload(int rank, uint64_t i, pg_dtype_t dtype) {
  return static_cast<double>((i * 13 + rank * 29) % (dtype == PG_DTYPE_I8 ? 127 : 250));
}

bool matches(pg_dtype_t dtype, pg_reduce_op_t op, double got, double want) {
  if (op != PG_REDUCE_AVG || !is_float(dtype)) return got == want;
  const double tol = dtype == PG_DTYPE_F16 || dtype == PG_DTYPE_BF16 ? 1e-2 : 1e-6;
  return std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want));
}

}  // namespace procgroup::ucx_test
