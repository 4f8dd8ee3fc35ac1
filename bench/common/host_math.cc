// Host-side element arithmetic (see host_math.h).
#include "host_math.h"

#include <algorithm>

namespace procgroup::bench {
namespace {

template <typename T>
T apply(RedOp op, T a, T b) {
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg: return static_cast<T>(a + b);
    case RedOp::kProd: return static_cast<T>(a * b);
    case RedOp::kMin: return std::min(a, b);
    case RedOp::kMax: return std::max(a, b);
  }
  return a;
}

// One loop per op, so the op's switch folds away and the loop vectorises (-O3).
template <typename T, RedOp Op>
void reduce_loop(void* inout, const void* in, uint64_t count) {
  auto* o = static_cast<T*>(inout);
  const auto* x = static_cast<const T*>(in);
  for (uint64_t i = 0; i < count; ++i) o[i] = apply<T>(Op, o[i], x[i]);
}

template <typename T>
void reduce_typed(RedOp op, void* inout, const void* in, uint64_t count) {
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg: return reduce_loop<T, RedOp::kSum>(inout, in, count);
    case RedOp::kProd: return reduce_loop<T, RedOp::kProd>(inout, in, count);
    case RedOp::kMin: return reduce_loop<T, RedOp::kMin>(inout, in, count);
    case RedOp::kMax: return reduce_loop<T, RedOp::kMax>(inout, in, count);
  }
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void reduce_16(RedOp op, void* inout, const void* in, uint64_t count) {
  auto* o = static_cast<uint16_t*>(inout);
  const auto* x = static_cast<const uint16_t*>(in);
  for (uint64_t i = 0; i < count; ++i) o[i] = FromFloat(apply(op, ToFloat(o[i]), ToFloat(x[i])));
}

template <typename T>
void scale_float(void* data, uint64_t count, uint64_t divisor) {
  auto* d = static_cast<T*>(data);
  const T inv = T{1} / static_cast<T>(divisor);
  for (uint64_t i = 0; i < count; ++i) d[i] *= inv;
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void scale_16(void* data, uint64_t count, uint64_t divisor) {
  auto* d = static_cast<uint16_t*>(data);
  const float inv = 1.0f / static_cast<float>(divisor);
  for (uint64_t i = 0; i < count; ++i) d[i] = FromFloat(ToFloat(d[i]) * inv);
}

template <typename T>
void scale_int(void* data, uint64_t count, uint64_t divisor) {
  auto* d = static_cast<T*>(data);
  const auto div = static_cast<int64_t>(divisor);
  for (uint64_t i = 0; i < count; ++i) d[i] = static_cast<T>(static_cast<int64_t>(d[i]) / div);
}

}  // namespace

void reduce_into(Dtype dtype, RedOp op, void* inout, const void* in, uint64_t count) {
  switch (dtype) {
    case Dtype::kF32: reduce_typed<float>(op, inout, in, count); break;
    case Dtype::kF64: reduce_typed<double>(op, inout, in, count); break;
    case Dtype::kF16: reduce_16<half_to_float, float_to_half>(op, inout, in, count); break;
    case Dtype::kBf16: reduce_16<bf16_to_float, float_to_bf16>(op, inout, in, count); break;
    case Dtype::kI8: reduce_typed<int8_t>(op, inout, in, count); break;
    case Dtype::kU8: reduce_typed<uint8_t>(op, inout, in, count); break;
    case Dtype::kI32: reduce_typed<int32_t>(op, inout, in, count); break;
    case Dtype::kI64: reduce_typed<int64_t>(op, inout, in, count); break;
  }
}

void scale_down(Dtype dtype, void* data, uint64_t count, uint64_t divisor) {
  if (divisor <= 1) return;
  switch (dtype) {
    case Dtype::kF32: scale_float<float>(data, count, divisor); break;
    case Dtype::kF64: scale_float<double>(data, count, divisor); break;
    case Dtype::kF16: scale_16<half_to_float, float_to_half>(data, count, divisor); break;
    case Dtype::kBf16: scale_16<bf16_to_float, float_to_bf16>(data, count, divisor); break;
    case Dtype::kI8: scale_int<int8_t>(data, count, divisor); break;
    case Dtype::kU8: scale_int<uint8_t>(data, count, divisor); break;
    case Dtype::kI32: scale_int<int32_t>(data, count, divisor); break;
    case Dtype::kI64: scale_int<int64_t>(data, count, divisor); break;
  }
}

double load_as_double(Dtype dtype, const void* data, uint64_t i) {
  switch (dtype) {
    case Dtype::kF32: return static_cast<const float*>(data)[i];
    case Dtype::kF64: return static_cast<const double*>(data)[i];
    case Dtype::kF16: return half_to_float(static_cast<const uint16_t*>(data)[i]);
    case Dtype::kBf16: return bf16_to_float(static_cast<const uint16_t*>(data)[i]);
    case Dtype::kI8: return static_cast<const int8_t*>(data)[i];
    case Dtype::kU8: return static_cast<const uint8_t*>(data)[i];
    case Dtype::kI32: return static_cast<const int32_t*>(data)[i];
    case Dtype::kI64: return static_cast<double>(static_cast<const int64_t*>(data)[i]);
  }
  return 0;
}

void store_integer(Dtype dtype, void* data, uint64_t i, int64_t v) {
  switch (dtype) {
    case Dtype::kF32: static_cast<float*>(data)[i] = static_cast<float>(v); break;
    case Dtype::kF64: static_cast<double*>(data)[i] = static_cast<double>(v); break;
    case Dtype::kF16: static_cast<uint16_t*>(data)[i] = float_to_half(static_cast<float>(v)); break;
    case Dtype::kBf16:
      static_cast<uint16_t*>(data)[i] = float_to_bf16(static_cast<float>(v));
      break;
    case Dtype::kI8: static_cast<int8_t*>(data)[i] = static_cast<int8_t>(v); break;
    case Dtype::kU8: static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(v); break;
    case Dtype::kI32: static_cast<int32_t*>(data)[i] = static_cast<int32_t>(v); break;
    case Dtype::kI64: static_cast<int64_t*>(data)[i] = v; break;
  }
}

}  // namespace procgroup::bench
