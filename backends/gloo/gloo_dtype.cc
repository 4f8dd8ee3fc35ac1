// Reduction kernels per dtype for the gloo backend (see gloo_dtype.h).
#include "gloo_dtype.h"

#include <gloo/math.h>
#include <gloo/types.h>

#include <algorithm>

namespace procgroup::gloo_backend {
namespace {

// Gloo's kernels for a type it handles itself: indexed by pg_reduce_op_t.
template <typename T>
ReduceFn gloo_kernel(pg_reduce_op_t op) {
  switch (op) {
    case PG_REDUCE_SUM:
    case PG_REDUCE_AVG: return &gloo::sum<T>;
    case PG_REDUCE_PROD: return &gloo::product<T>;
    case PG_REDUCE_MIN: return &gloo::min<T>;
    case PG_REDUCE_MAX: return &gloo::max<T>;
    default: return nullptr;
  }
}

// 16-bit float kernels: widen to float, apply op, round back to nearest even, writing the
// raw bits (the kit's converters). Not gloo::float16's operators: its assignment skips the
// store when the old bits, read as an integer, equal the new value, which leaves stale
// results.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float), typename Op>
void half_apply(void* out, const void* a, const void* b, size_t n, Op op) {
  auto* o = static_cast<uint16_t*>(out);
  const auto* x = static_cast<const uint16_t*>(a);
  const auto* y = static_cast<const uint16_t*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = FromFloat(op(ToFloat(x[i]), ToFloat(y[i])));
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
ReduceFn half_kernel(pg_reduce_op_t op) {
  switch (op) {
    case PG_REDUCE_SUM:
    case PG_REDUCE_AVG:
      return [](void* o, const void* a, const void* b, size_t n) {
        half_apply<ToFloat, FromFloat>(o, a, b, n, [](float x, float y) { return x + y; });
      };
    case PG_REDUCE_PROD:
      return [](void* o, const void* a, const void* b, size_t n) {
        half_apply<ToFloat, FromFloat>(o, a, b, n, [](float x, float y) { return x * y; });
      };
    case PG_REDUCE_MIN:
      return [](void* o, const void* a, const void* b, size_t n) {
        half_apply<ToFloat, FromFloat>(o, a, b, n, [](float x, float y) { return std::min(x, y); });
      };
    case PG_REDUCE_MAX:
      return [](void* o, const void* a, const void* b, size_t n) {
        half_apply<ToFloat, FromFloat>(o, a, b, n, [](float x, float y) { return std::max(x, y); });
      };
    default: return nullptr;
  }
}

}  // namespace

ReduceFn reduce_function(pg_dtype_t dtype, pg_reduce_op_t op) {
  switch (dtype) {
    case PG_DTYPE_F32: return gloo_kernel<float>(op);
    case PG_DTYPE_F64: return gloo_kernel<double>(op);
    case PG_DTYPE_F16: return half_kernel<kit::half_to_float, kit::float_to_half>(op);
    case PG_DTYPE_BF16: return half_kernel<kit::bf16_to_float, kit::float_to_bf16>(op);
    case PG_DTYPE_I8: return gloo_kernel<int8_t>(op);
    case PG_DTYPE_U8: return gloo_kernel<uint8_t>(op);
    case PG_DTYPE_I32: return gloo_kernel<int32_t>(op);
    case PG_DTYPE_I64: return gloo_kernel<int64_t>(op);
    default: return nullptr;
  }
}

}  // namespace procgroup::gloo_backend
