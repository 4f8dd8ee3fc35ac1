#include "reference.h"

#include <cmath>
#include <cstring>

#include "collectives/reduce.h"

namespace pgtest {
using namespace procgroup::detail;

double input_value(int rank, uint64_t i, pg_reduce_op_t op) {
  if (op == PG_REDUCE_PROD) return static_cast<double>((rank + i) % 2 + 1);  // product <= 2^5
  return static_cast<double>((3 * rank + i) % 5 + 1);
}

namespace {


double reduce_over_ranks(pg_reduce_op_t op, pg_dtype_t dtype, int size, uint64_t index) {
  double acc = input_value(0, index, op);
  for (int r = 1; r < size; ++r) {
    double v = input_value(r, index, op);
    switch (op) {
      case PG_REDUCE_SUM:
      case PG_REDUCE_AVG: acc += v; break;
      case PG_REDUCE_PROD: acc *= v; break;
      case PG_REDUCE_MIN: acc = std::min(acc, v); break;
      case PG_REDUCE_MAX: acc = std::max(acc, v); break;
      default: break;
    }
  }
  if (op == PG_REDUCE_AVG) {
    bool floating = dtype == PG_DTYPE_F32 || dtype == PG_DTYPE_F64 || dtype == PG_DTYPE_F16 ||
                    dtype == PG_DTYPE_BF16;
    acc = floating ? acc / size : std::trunc(acc / size);
  }
  return acc;
}

}  // namespace

double expected_value(pg_op_t op, pg_reduce_op_t redop, pg_dtype_t dtype, int rank, int size,
                      int root, uint64_t n, uint64_t i) {
  switch (op) {
    case PG_OP_ALLREDUCE:
    case PG_OP_REDUCE: return reduce_over_ranks(redop, dtype, size, i);
    case PG_OP_BROADCAST: return input_value(root, i, redop);
    case PG_OP_ALLGATHER:
    case PG_OP_GATHER: return input_value(static_cast<int>(i / n), i % n, redop);
    case PG_OP_REDUCE_SCATTER: return reduce_over_ranks(redop, dtype, size, rank * n + i);
    case PG_OP_SCATTER: return input_value(root, rank * n + i, redop);
    case PG_OP_ALLTOALL: return input_value(static_cast<int>(i / n), rank * n + i % n, redop);
    default: return 0;
  }
}

std::vector<uint8_t> encode(pg_dtype_t dtype, const std::vector<double>& values) {
  std::vector<uint8_t> out;
  auto put = [&](const auto& v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out.insert(out.end(), p, p + sizeof(v));
  };
  for (double v : values) {
    switch (dtype) {
      case PG_DTYPE_F32: put(static_cast<float>(v)); break;
      case PG_DTYPE_F64: put(v); break;
      case PG_DTYPE_F16: put(float_to_half(static_cast<float>(v))); break;
      case PG_DTYPE_BF16: put(float_to_bf16(static_cast<float>(v))); break;
      case PG_DTYPE_I8: put(static_cast<int8_t>(v)); break;
      case PG_DTYPE_U8: put(static_cast<uint8_t>(v)); break;
      case PG_DTYPE_I32: put(static_cast<int32_t>(v)); break;
      case PG_DTYPE_I64: put(static_cast<int64_t>(v)); break;
      default: break;
    }
  }
  return out;
}

double decode(pg_dtype_t dtype, const std::vector<uint8_t>& bytes, uint64_t i) {
  auto get = [&](auto v) {
    std::memcpy(&v, bytes.data() + i * sizeof(v), sizeof(v));
    return v;
  };
  switch (dtype) {
    case PG_DTYPE_F32: return get(float{});
    case PG_DTYPE_F64: return get(double{});
    case PG_DTYPE_F16: return half_to_float(get(uint16_t{}));
    case PG_DTYPE_BF16: return bf16_to_float(get(uint16_t{}));
    case PG_DTYPE_I8: return get(int8_t{});
    case PG_DTYPE_U8: return get(uint8_t{});
    case PG_DTYPE_I32: return get(int32_t{});
    case PG_DTYPE_I64: return static_cast<double>(get(int64_t{}));
    default: return NAN;
  }
}

bool close_enough(pg_dtype_t dtype, pg_reduce_op_t op, double got, double want) {
  if (op != PG_REDUCE_AVG) return got == want;  // small integers: exact in every dtype
  double tolerance = dtype == PG_DTYPE_F16 || dtype == PG_DTYPE_BF16 ? 1e-2 : 1e-6;
  return std::fabs(got - want) <= tolerance * std::max(1.0, std::fabs(want));
}

std::vector<pg_dtype_t> all_dtypes() {
  return {PG_DTYPE_F32, PG_DTYPE_F64, PG_DTYPE_F16, PG_DTYPE_BF16,
          PG_DTYPE_I8,  PG_DTYPE_U8,  PG_DTYPE_I32, PG_DTYPE_I64};
}

std::vector<pg_reduce_op_t> all_reduce_ops() {
  return {PG_REDUCE_SUM, PG_REDUCE_AVG, PG_REDUCE_PROD, PG_REDUCE_MIN, PG_REDUCE_MAX};
}

}  // namespace pgtest
