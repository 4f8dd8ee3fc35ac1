// Benchmark data and its checker (see data.h).
#include "data.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "host_math.h"

namespace procgroup::bench {
namespace {

// A well-mixed 64-bit hash of (source rank, element index, rep): neighbouring elements and
// ranks get unrelated values, so misplaced blocks or shifted offsets do not go unnoticed.
uint64_t mix(int64_t src, uint64_t j, uint32_t rep) {
  uint64_t x = (j + 1) * 0x9E3779B97F4A7C15ull +
               static_cast<uint64_t>(src + 1) * 0xC2B2AE3D27D4EB4Full +
               (uint64_t{rep} + 1) * 0x165667B19E3779F9ull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return x;
}

// What rank src puts at index j of a non-reducing collective: 0..126, fits every dtype.
int64_t pattern(int src, uint64_t j, uint32_t rep) {
  return static_cast<int64_t>(mix(src, j, rep) % 127);
}

// The largest value per rank that keeps a sum over n ranks at or below 120 (exact in i8 and
// bf16); at least 1 so the data is never all zeros.
int64_t sum_span(int n) { return std::max<int64_t>(2, 120 / n + 1); }
int64_t avg_span(int n) { return std::max<int64_t>(2, 120 / (int64_t{n} * n) + 1); }

// Rank r's contribution to element j of a reduction.
int64_t contribution(RedOp op, int r, uint64_t j, int n, uint32_t rep) {
  switch (op) {
    case RedOp::kSum: return static_cast<int64_t>(mix(r, j, rep) % sum_span(n));
    // A multiple of n, so the average is an integer.
    case RedOp::kAvg: return n * static_cast<int64_t>(mix(r, j, rep) % avg_span(n));
    // One rank (which depends on j) holds 1, 2 or 3; the others 1: products stay tiny.
    case RedOp::kProd:
      return (static_cast<uint64_t>(r) + j) % static_cast<uint64_t>(n) == 0
                 ? 1 + static_cast<int64_t>(mix(-1, j, rep) % 3)
                 : 1;
    case RedOp::kMin:
    case RedOp::kMax: return static_cast<int64_t>(mix(r, j, rep) % 101);
  }
  return 0;
}

int64_t reduced(RedOp op, uint64_t j, int n, uint32_t rep) {
  int64_t acc = contribution(op, 0, j, n, rep);
  for (int r = 1; r < n; ++r) {
    const int64_t c = contribution(op, r, j, n, rep);
    switch (op) {
      case RedOp::kSum:
      case RedOp::kAvg: acc += c; break;
      case RedOp::kProd: acc *= c; break;
      case RedOp::kMin: acc = std::min(acc, c); break;
      case RedOp::kMax: acc = std::max(acc, c); break;
    }
  }
  return op == RedOp::kAvg ? acc / n : acc;
}

// Unit in the last place relative to the value, for avg's rounded division.
double relative_ulp(Dtype dtype) {
  switch (dtype) {
    case Dtype::kF16: return std::ldexp(1.0, -10);
    case Dtype::kBf16: return std::ldexp(1.0, -7);
    case Dtype::kF32: return std::ldexp(1.0, -23);
    case Dtype::kF64: return std::ldexp(1.0, -52);
    default: return 0;
  }
}

}  // namespace

void fill_input(const DataSpec& s, const Layout& l, void* input) {
  const uint64_t total = l.send_count;
  if (reduces(s.op)) {
    for (uint64_t j = 0; j < total; ++j) {
      store_integer(s.dtype, input, j, contribution(s.redop, s.rank, j, s.nranks, s.rep));
    }
    return;
  }
  // Non-reducing: index j of this rank's input buffer, whatever its role.
  for (uint64_t j = 0; j < total; ++j) {
    store_integer(s.dtype, input, j, pattern(s.rank, j, s.rep));
  }
}

void fill_expected(const DataSpec& s, const Layout& l, void* expected) {
  const uint64_t n = l.count;
  const int size = s.nranks;
  auto put = [&](uint64_t i, int64_t v) { store_integer(s.dtype, expected, i, v); };
  switch (s.op) {
    case Coll::kAllreduce:
    case Coll::kReduce:
      for (uint64_t j = 0; j < n; ++j) put(j, reduced(s.redop, j, size, s.rep));
      break;
    case Coll::kReduceScatter:
      for (uint64_t k = 0; k < n; ++k) put(k, reduced(s.redop, s.rank * n + k, size, s.rep));
      break;
    case Coll::kAllgather:
    case Coll::kGather:
      for (uint64_t j = 0; j < n * size; ++j)
        put(j, pattern(static_cast<int>(j / n), j % n, s.rep));
      break;
    case Coll::kBroadcast:
      for (uint64_t k = 0; k < n; ++k) put(k, pattern(s.root, k, s.rep));
      break;
    case Coll::kScatter:
      for (uint64_t k = 0; k < n; ++k) put(k, pattern(s.root, s.rank * n + k, s.rep));
      break;
    case Coll::kAlltoall:
      for (uint64_t j = 0; j < n * size; ++j) {
        put(j, pattern(static_cast<int>(j / n), s.rank * n + j % n, s.rep));
      }
      break;
    case Coll::kSendrecv:
      for (uint64_t k = 0; k < n; ++k) put(k, pattern((s.rank + size - 1) % size, k, s.rep));
      break;
  }
}

bool output_checked(const DataSpec& s) {
  return !(s.op == Coll::kReduce || s.op == Coll::kGather) || s.rank == s.root;
}

uint64_t count_wrong(const DataSpec& s, const void* expected, const void* got, uint64_t count) {
  uint64_t wrong = 0;
  if (s.redop == RedOp::kAvg && reduces(s.op) && is_floating(s.dtype)) {
    const double ulp = relative_ulp(s.dtype);
    for (uint64_t i = 0; i < count; ++i) {
      const double e = load_as_double(s.dtype, expected, i);
      const double g = load_as_double(s.dtype, got, i);
      if (!(std::fabs(g - e) <= ulp * std::fabs(e))) ++wrong;  // NaN counts as wrong
    }
    return wrong;
  }
  const size_t es = dtype_size(s.dtype);
  const auto* e = static_cast<const unsigned char*>(expected);
  const auto* g = static_cast<const unsigned char*>(got);
  // Compare in large blocks first: results are usually right, and memcmp is fast.
  constexpr uint64_t kBlock = 4096;
  for (uint64_t start = 0; start < count; start += kBlock) {
    const uint64_t len = std::min(kBlock, count - start);
    if (std::memcmp(e + start * es, g + start * es, len * es) == 0) continue;
    for (uint64_t i = start; i < start + len; ++i) {
      if (std::memcmp(e + i * es, g + i * es, es) != 0) ++wrong;
    }
  }
  return wrong;
}

void poison(void* data, uint64_t bytes) {
  if (bytes > 0) std::memset(data, 0xff, bytes);
}

void corrupt_first_element(Dtype dtype, void* input) { store_integer(dtype, input, 0, 127); }

}  // namespace procgroup::bench
