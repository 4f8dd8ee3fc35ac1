#include "test_data.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "collectives/reduce.h"
#include "common/dtype.h"

namespace procgroup::detail::testing {
namespace {

template <class T>
T get(const void* data, uint64_t i) {
  T v;
  std::memcpy(&v, static_cast<const uint8_t*>(data) + i * sizeof(T), sizeof(T));
  return v;
}

template <class T>
void put(void* data, uint64_t i, T v) {
  std::memcpy(static_cast<uint8_t*>(data) + i * sizeof(T), &v, sizeof(T));
}

bool is_unsigned(pg_dtype_t dtype) { return dtype == PG_DTYPE_U8; }

}  // namespace

double load(pg_dtype_t dtype, const void* data, uint64_t i) {
  switch (dtype) {
    case PG_DTYPE_F32: return get<float>(data, i);
    case PG_DTYPE_F64: return get<double>(data, i);
    case PG_DTYPE_F16: return half_to_float(get<uint16_t>(data, i));
    case PG_DTYPE_BF16: return bf16_to_float(get<uint16_t>(data, i));
    case PG_DTYPE_I8: return get<int8_t>(data, i);
    case PG_DTYPE_U8: return get<uint8_t>(data, i);
    case PG_DTYPE_I32: return get<int32_t>(data, i);
    case PG_DTYPE_I64: return static_cast<double>(get<int64_t>(data, i));
    default: throw std::invalid_argument("load: bad dtype");
  }
}

void store(pg_dtype_t dtype, void* data, uint64_t i, double v) {
  // Integers: through uint64 so that negative values and overflow wrap like the kernels.
  const auto wrapped = static_cast<uint64_t>(static_cast<int64_t>(v));
  switch (dtype) {
    case PG_DTYPE_F32: put(data, i, static_cast<float>(v)); break;
    case PG_DTYPE_F64: put(data, i, v); break;
    case PG_DTYPE_F16: put(data, i, float_to_half(static_cast<float>(v))); break;
    case PG_DTYPE_BF16: put(data, i, float_to_bf16(static_cast<float>(v))); break;
    case PG_DTYPE_I8: put(data, i, static_cast<int8_t>(wrapped)); break;
    case PG_DTYPE_U8: put(data, i, static_cast<uint8_t>(wrapped)); break;
    case PG_DTYPE_I32: put(data, i, static_cast<int32_t>(wrapped)); break;
    case PG_DTYPE_I64: put(data, i, static_cast<int64_t>(wrapped)); break;
    default: throw std::invalid_argument("store: bad dtype");
  }
}

double input_value(pg_dtype_t dtype, pg_reduce_op_t op, int rank, uint64_t i) {
  const uint64_t r = static_cast<uint64_t>(rank);
  switch (op) {
    case PG_REDUCE_PROD: {
      static constexpr double kFactors[] = {1, 2, -1, -2, 1, -1, 2};
      const double f = kFactors[(r * 3 + i) % 7];
      return is_unsigned(dtype) ? std::fabs(f) : f;
    }
    case PG_REDUCE_MIN:
    case PG_REDUCE_MAX: {
      const double v = static_cast<double>((r * 13 + i * 5) % 17);
      return is_unsigned(dtype) ? v : v - 8;
    }
    default: {  // SUM, AVG and data for the non-reducing collectives
      const double v = static_cast<double>((r * 7 + i * 3) % 11);
      return is_unsigned(dtype) ? v : v - 5;
    }
  }
}

Bytes make_input(pg_dtype_t dtype, pg_reduce_op_t op, int rank, uint64_t count, uint64_t first) {
  Bytes out(count * dtype_size(dtype));
  for (uint64_t j = 0; j < count; ++j)
    store(dtype, out.data(), j, input_value(dtype, op, rank, first + j));
  return out;
}

Bytes reference_reduce(pg_dtype_t dtype, pg_reduce_op_t op, int size, uint64_t count,
                       uint64_t first) {
  Bytes out(count * dtype_size(dtype));
  for (uint64_t j = 0; j < count; ++j) {
    // Values are small integers, so double holds every partial result exactly.
    double acc = input_value(dtype, op, 0, first + j);
    for (int r = 1; r < size; ++r) {
      const double v = input_value(dtype, op, r, first + j);
      switch (op) {
        case PG_REDUCE_SUM:
        case PG_REDUCE_AVG: acc += v; break;
        case PG_REDUCE_PROD: acc *= v; break;
        case PG_REDUCE_MIN: acc = std::fmin(acc, v); break;
        case PG_REDUCE_MAX: acc = std::fmax(acc, v); break;
        default: throw std::invalid_argument("reference_reduce: bad op");
      }
    }
    store(dtype, out.data(), j, acc);  // wraps integers, exact for floats
    if (op != PG_REDUCE_AVG) continue;
    const double sum = load(dtype, out.data(), j);
    switch (dtype) {
      case PG_DTYPE_F64: store(dtype, out.data(), j, sum * (1.0 / size)); break;
      case PG_DTYPE_F32:
      case PG_DTYPE_F16:
      case PG_DTYPE_BF16:
        store(dtype, out.data(), j, static_cast<float>(sum) * (1.0f / static_cast<float>(size)));
        break;
      default: store(dtype, out.data(), j, std::trunc(sum / size)); break;
    }
  }
  return out;
}

std::string describe(pg_dtype_t dtype, pg_reduce_op_t op) {
  return fmt::format("{} {}", dtype_name(dtype), reduce_op_name(op));
}

}  // namespace procgroup::detail::testing
