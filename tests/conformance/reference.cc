#include "reference.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

namespace pgtest {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hash(uint64_t stream, uint64_t i, uint32_t salt) {
  return mix(i * 0x2545f4914f6cdd1dull + stream * 0xd1b54a32d192ed03ull +
             salt * 0x8cb92ba72f3d8dd7ull);
}

struct FloatFormat {
  int digits;   // significand bits, the implicit one included
  int min_exp;  // exponent of the smallest normal number
};

FloatFormat format_of(pg_dtype_t dtype) {
  switch (dtype) {
    case PG_DTYPE_F16: return {11, -14};
    case PG_DTYPE_BF16: return {8, -126};
    case PG_DTYPE_F32: return {24, -126};
    default: return {53, -1022};
  }
}

// 2^k by its bits (std::ldexp is a library call per element; Large checks millions).
double pow2(int k) {
  if (k < -1022) return std::ldexp(1.0, k);  // subnormal
  return std::bit_cast<double>(static_cast<uint64_t>(k + 1023) << 52);
}

double ulp(pg_dtype_t dtype, double x) {
  const FloatFormat f = format_of(dtype);
  const int e = x == 0 ? f.min_exp : std::max(std::ilogb(std::fabs(x)), f.min_exp);
  return pow2(e - (f.digits - 1));
}

// Values over the dtype's whole width (data movement, MIN, MAX): a truncated i64 or a
// reordered f16 fraction shows.
double wide_value(pg_dtype_t dtype, uint64_t h) {
  switch (dtype) {
    case PG_DTYPE_F64: return static_cast<double>(h >> 12) * 0x1p-20 - 2147483648.0;
    case PG_DTYPE_F32: return static_cast<double>(h % (1u << 24)) * 0x1p-8 - 32768.0;
    case PG_DTYPE_F16: return static_cast<double>(h % 2048) * 0x1p-3 - 128.0;
    case PG_DTYPE_BF16: return static_cast<double>(h % 256) * 0x1p-2 - 32.0;
    case PG_DTYPE_I8: return static_cast<double>(h % 256) - 128.0;
    case PG_DTYPE_U8: return static_cast<double>(h % 256);
    case PG_DTYPE_I32: return static_cast<double>(h % (1ull << 32)) - 2147483648.0;
    default: return static_cast<double>(h % (1ull << 53)) - 4503599627370496.0;  // i64
  }
}

// Multiples of a quantum whose sum over `size` ranks stays exactly representable.
double sum_value(pg_dtype_t dtype, uint64_t h, int size) {
  double limit = 0, quantum = 1;  // |sum| <= limit * quantum
  switch (dtype) {
    case PG_DTYPE_I8: limit = 127; break;
    case PG_DTYPE_U8: return static_cast<double>(h % (255 / size + 1));
    case PG_DTYPE_I32: limit = 2147483647.0; break;
    case PG_DTYPE_I64: limit = 4503599627370496.0; break;
    default:
      quantum = 0.25;
      limit = std::min(std::ldexp(1.0, format_of(dtype).digits) - 1, std::ldexp(1.0, 50));
  }
  const auto k = static_cast<uint64_t>(limit) / static_cast<uint64_t>(size);
  return (static_cast<double>(h % (2 * k + 1)) - static_cast<double>(k)) * quantum;
}

// Factors whose product over the ranks stays representable: in i8 (u8) only ranks 0-5
// (0-6) may contribute a 2, so 7 or more ranks do not overflow.
double prod_value(pg_dtype_t dtype, uint64_t h, int rank) {
  const bool doubling =
      !(dtype == PG_DTYPE_I8 && rank >= 6) && !(dtype == PG_DTYPE_U8 && rank >= 7);
  if (dtype == PG_DTYPE_U8) return h % 2 && doubling ? 2.0 : 1.0;
  if (is_floating(dtype)) {
    static constexpr double kChoices[] = {-1.0, 0.5, 1.0, 2.0};
    return kChoices[h % 4];
  }
  static constexpr double kChoices[] = {-1.0, 1.0, 2.0};
  const double v = kChoices[h % 3];
  return v == 2.0 && !doubling ? 1.0 : v;
}

// Reduction of element `index` of every rank's input.
Expected reduce_expected(const CollectiveCase& c, int size, uint64_t index) {
  const bool floating = is_floating(c.dtype);
  double acc = input_value(c, 0, size, index), abs_sum = std::fabs(acc);
  for (int r = 1; r < size; ++r) {
    const double v = input_value(c, r, size, index);
    abs_sum += std::fabs(v);
    switch (c.redop) {
      case PG_REDUCE_SUM:
      case PG_REDUCE_AVG: acc += v; break;
      case PG_REDUCE_PROD: acc *= v; break;
      case PG_REDUCE_MIN: acc = std::min(acc, v); break;
      case PG_REDUCE_MAX: acc = std::max(acc, v); break;
      default: break;
    }
  }
  // Fractional data on more than two ranks: every step may round (in any order).
  const bool rounds = c.pattern == Pattern::kRounding && floating && size > 2;
  if (c.redop == PG_REDUCE_AVG) {
    if (!floating) return {static_cast<double>(static_cast<int64_t>(acc) / size), 0};
    const double want = round_to_dtype(c.dtype, acc / size);
    // x * (1 / size) rounds twice; a sum that rounded, or terms scaled before the sum
    // (NCCL's premultiplied sum), add at most two ulp of sum(|x_r|).
    return {want, ulp(c.dtype, want) + (rounds ? 2 * ulp(c.dtype, abs_sum) : 0)};
  }
  if (rounds && c.redop == PG_REDUCE_SUM)
    return {round_to_dtype(c.dtype, acc), size * ulp(c.dtype, abs_sum)};
  // |x_r| < 1: no partial product is smaller than the result; each step rounds once.
  if (rounds && c.redop == PG_REDUCE_PROD)
    return {round_to_dtype(c.dtype, acc), size * ulp(c.dtype, acc)};
  return {round_to_dtype(c.dtype, acc), 0};
}

}  // namespace

bool reduces(pg_op_t op) {
  return op == PG_OP_ALLREDUCE || op == PG_OP_REDUCE || op == PG_OP_REDUCE_SCATTER;
}
bool rooted(pg_op_t op) {
  return op == PG_OP_BROADCAST || op == PG_OP_REDUCE || op == PG_OP_GATHER || op == PG_OP_SCATTER;
}
bool input_is_blocked(pg_op_t op) {
  return op == PG_OP_REDUCE_SCATTER || op == PG_OP_SCATTER || op == PG_OP_ALLTOALL;
}
bool output_is_blocked(pg_op_t op) {
  return op == PG_OP_ALLGATHER || op == PG_OP_GATHER || op == PG_OP_ALLTOALL;
}
bool is_floating(pg_dtype_t dtype) {
  return dtype == PG_DTYPE_F32 || dtype == PG_DTYPE_F64 || dtype == PG_DTYPE_F16 ||
         dtype == PG_DTYPE_BF16;
}

double input_value(const CollectiveCase& c, int rank, int size, uint64_t i) {
  const uint64_t h = hash(static_cast<uint64_t>(rank) + 1, i, c.salt);
  if (c.pattern == Pattern::kRounding && is_floating(c.dtype)) {
    const double u = static_cast<double>(h >> 11) * 0x1p-52 - 1.0;  // [-1, 1)
    return round_to_dtype(c.dtype, u);
  }
  if (!reduces(c.op)) return wide_value(c.dtype, h);
  switch (c.redop) {
    case PG_REDUCE_SUM:
    case PG_REDUCE_AVG: return sum_value(c.dtype, h, size);
    case PG_REDUCE_PROD: return prod_value(c.dtype, h, rank);
    default: return wide_value(c.dtype, h);
  }
}

Expected expected_output(const CollectiveCase& c, int rank, int size, uint64_t i) {
  const uint64_t n = c.n;
  switch (c.op) {
    case PG_OP_ALLREDUCE:
    case PG_OP_REDUCE: return reduce_expected(c, size, i);
    case PG_OP_REDUCE_SCATTER: return reduce_expected(c, size, rank * n + i);
    case PG_OP_BROADCAST: return {input_value(c, c.root, size, i), 0};
    case PG_OP_ALLGATHER:
    case PG_OP_GATHER: return {input_value(c, static_cast<int>(i / n), size, i % n), 0};
    case PG_OP_SCATTER: return {input_value(c, c.root, size, rank * n + i), 0};
    case PG_OP_ALLTOALL:
      return {input_value(c, static_cast<int>(i / n), size, rank * n + i % n), 0};
    default: return {std::nan(""), 0};
  }
}

bool matches(const Expected& e, double got) {
  if (std::isnan(got) || std::isnan(e.value)) return false;
  return e.tolerance == 0 ? got == e.value : std::fabs(got - e.value) <= e.tolerance;
}

double message_value(pg_dtype_t dtype, int src, int dst, uint32_t salt, uint64_t i) {
  return wide_value(dtype, hash(1000003ull * (src + 1) + dst, i, salt));
}

size_t dtype_size(pg_dtype_t dtype) {
  switch (dtype) {
    case PG_DTYPE_F64:
    case PG_DTYPE_I64: return 8;
    case PG_DTYPE_F32:
    case PG_DTYPE_I32: return 4;
    case PG_DTYPE_F16:
    case PG_DTYPE_BF16: return 2;
    case PG_DTYPE_I8:
    case PG_DTYPE_U8: return 1;
    default: return 0;
  }
}

double round_to_dtype(pg_dtype_t dtype, double x) {
  if (dtype == PG_DTYPE_F32) return static_cast<float>(x);
  if ((dtype != PG_DTYPE_F16 && dtype != PG_DTYPE_BF16) || x == 0 || !std::isfinite(x)) return x;
  const double quantum = ulp(dtype, x);
  const double r = std::nearbyint(x / quantum) * quantum;  // ties to even (default mode)
  const double max = dtype == PG_DTYPE_F16 ? 65504.0 : 3.3895313892515355e38;
  return std::fabs(r) > max ? std::copysign(INFINITY, x) : r;
}

namespace {

uint16_t half_bits(double v) {  // v is representable as f16
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (a == 0) return sign;
  if (std::isinf(a)) return sign | 0x7c00;
  const int e = std::ilogb(a);
  if (e < -14) return sign | static_cast<uint16_t>(a * 0x1p24);
  const auto mantissa = static_cast<uint16_t>(a * pow2(10 - e) - 1024);
  return sign | static_cast<uint16_t>((e + 15) << 10) | mantissa;
}

double half_value(uint16_t h) {
  const int exp = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double v = exp == 0    ? mantissa * 0x1p-24
             : exp == 31 ? (mantissa ? NAN : INFINITY)
                         : (mantissa + 1024) * pow2(exp - 25);
  return h & 0x8000 ? -v : v;
}

template <class T>
void put(void* base, uint64_t i, T v) {
  std::memcpy(static_cast<char*>(base) + i * sizeof(T), &v, sizeof(T));
}
template <class T>
T get(const void* base, uint64_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + i * sizeof(T), sizeof(T));
  return v;
}

}  // namespace

void store_value(pg_dtype_t dtype, void* base, uint64_t i, double v) {
  switch (dtype) {
    case PG_DTYPE_F32: put(base, i, static_cast<float>(v)); break;
    case PG_DTYPE_F64: put(base, i, v); break;
    case PG_DTYPE_F16: put(base, i, half_bits(v)); break;
    case PG_DTYPE_BF16:
      put(base, i, static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(v)) >> 16));
      break;
    case PG_DTYPE_I8: put(base, i, static_cast<int8_t>(v)); break;
    case PG_DTYPE_U8: put(base, i, static_cast<uint8_t>(v)); break;
    case PG_DTYPE_I32: put(base, i, static_cast<int32_t>(v)); break;
    case PG_DTYPE_I64: put(base, i, static_cast<int64_t>(v)); break;
    default: break;
  }
}

double load_value(pg_dtype_t dtype, const void* base, uint64_t i) {
  switch (dtype) {
    case PG_DTYPE_F32: return get<float>(base, i);
    case PG_DTYPE_F64: return get<double>(base, i);
    case PG_DTYPE_F16: return half_value(get<uint16_t>(base, i));
    case PG_DTYPE_BF16:
      return std::bit_cast<float>(static_cast<uint32_t>(get<uint16_t>(base, i)) << 16);
    case PG_DTYPE_I8: return get<int8_t>(base, i);
    case PG_DTYPE_U8: return get<uint8_t>(base, i);
    case PG_DTYPE_I32: return get<int32_t>(base, i);
    case PG_DTYPE_I64: return static_cast<double>(get<int64_t>(base, i));
    default: return NAN;
  }
}

const char* dtype_name(pg_dtype_t dtype) {
  static constexpr const char* kNames[] = {"invalid", "f32", "f64", "f16", "bf16",
                                           "i8",      "u8",  "i32", "i64"};
  return dtype > 0 && dtype < PG_DTYPE_COUNT_ ? kNames[dtype] : "invalid";
}
const char* reduce_op_name(pg_reduce_op_t op) {
  static constexpr const char* kNames[] = {"sum", "avg", "prod", "min", "max"};
  return op >= 0 && op < PG_REDUCE_COUNT_ ? kNames[op] : "invalid";
}
const char* op_name(pg_op_t op) {
  static constexpr const char* kNames[] = {"allreduce",      "broadcast", "reduce",  "allgather",
                                           "reduce_scatter", "gather",    "scatter", "alltoall",
                                           "barrier",        "send",      "recv"};
  return op >= 0 && op < PG_OP_COUNT_ ? kNames[op] : "invalid";
}

std::string CollectiveCase::to_string() const {
  std::string s = std::string(op_name(op)) + "(" + dtype_name(dtype) + " x " + std::to_string(n);
  if (reduces(op)) s += std::string(", ") + reduce_op_name(redop);
  if (rooted(op)) s += ", root " + std::to_string(root);
  if (in_place == InPlace::kNullInput) s += ", in place (input NULL)";
  if (in_place == InPlace::kAliased) s += ", in place (aliased pointers)";
  if (pattern == Pattern::kRounding) s += ", rounding data";
  return s + ", salt " + std::to_string(salt) + ")";
}

std::vector<pg_dtype_t> all_dtypes() {
  return {PG_DTYPE_F32, PG_DTYPE_F64, PG_DTYPE_F16, PG_DTYPE_BF16,
          PG_DTYPE_I8,  PG_DTYPE_U8,  PG_DTYPE_I32, PG_DTYPE_I64};
}
std::vector<pg_reduce_op_t> all_reduce_ops() {
  return {PG_REDUCE_SUM, PG_REDUCE_AVG, PG_REDUCE_PROD, PG_REDUCE_MIN, PG_REDUCE_MAX};
}
std::vector<pg_op_t> all_collectives() {
  return {PG_OP_ALLREDUCE,      PG_OP_BROADCAST, PG_OP_REDUCE,  PG_OP_ALLGATHER,
          PG_OP_REDUCE_SCATTER, PG_OP_GATHER,    PG_OP_SCATTER, PG_OP_ALLTOALL};
}

}  // namespace pgtest
