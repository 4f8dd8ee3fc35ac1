// Reduction kernels per dtype for the gloo backend (see gloo_dtype.h).
#include "gloo_dtype.h"

#include <gloo/math.h>
#include <gloo/types.h>

#include <algorithm>
#include <cstring>

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
// raw bits. Not gloo::float16's operators: its assignment skips the store when the old
// bits, read as an integer, equal the new value, which leaves stale results.
float f16_to_float(uint16_t bits) {
  gloo::float16 h;
  h.x = bits;
  return gloo::cpu_half2float(h);
}
uint16_t float_to_f16(float f) { return gloo::cpu_float2half_rn(f).x; }

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

size_t dtype_size(pg_dtype_t dtype) {
  switch (dtype) {
    case PG_DTYPE_F32:
    case PG_DTYPE_I32: return 4;
    case PG_DTYPE_F64:
    case PG_DTYPE_I64: return 8;
    case PG_DTYPE_F16:
    case PG_DTYPE_BF16: return 2;
    case PG_DTYPE_I8:
    case PG_DTYPE_U8: return 1;
    default: return 0;
  }
}

const char* dtype_name(pg_dtype_t dtype) {
  switch (dtype) {
    case PG_DTYPE_F32: return "f32";
    case PG_DTYPE_F64: return "f64";
    case PG_DTYPE_F16: return "f16";
    case PG_DTYPE_BF16: return "bf16";
    case PG_DTYPE_I8: return "i8";
    case PG_DTYPE_U8: return "u8";
    case PG_DTYPE_I32: return "i32";
    case PG_DTYPE_I64: return "i64";
    default: return "invalid";
  }
}

const char* reduce_op_name(pg_reduce_op_t op) {
  switch (op) {
    case PG_REDUCE_SUM: return "sum";
    case PG_REDUCE_AVG: return "avg";
    case PG_REDUCE_PROD: return "prod";
    case PG_REDUCE_MIN: return "min";
    case PG_REDUCE_MAX: return "max";
    default: return "invalid";
  }
}

ReduceFn reduce_function(pg_dtype_t dtype, pg_reduce_op_t op) {
  switch (dtype) {
    case PG_DTYPE_F32: return gloo_kernel<float>(op);
    case PG_DTYPE_F64: return gloo_kernel<double>(op);
    case PG_DTYPE_F16: return half_kernel<f16_to_float, float_to_f16>(op);
    case PG_DTYPE_BF16: return half_kernel<bf16_to_float, float_to_bf16>(op);
    case PG_DTYPE_I8: return gloo_kernel<int8_t>(op);
    case PG_DTYPE_U8: return gloo_kernel<uint8_t>(op);
    case PG_DTYPE_I32: return gloo_kernel<int32_t>(op);
    case PG_DTYPE_I64: return gloo_kernel<int64_t>(op);
    default: return nullptr;
  }
}

float bf16_to_float(uint16_t value) {
  const uint32_t bits = static_cast<uint32_t>(value) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

uint16_t float_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep the sign, force a quiet NaN
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  const uint32_t lsb = (bits >> 16) & 1u;  // ties go to the even neighbour
  bits += 0x7fffu + lsb;                   // may carry into the exponent: correct, incl. inf
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace procgroup::gloo_backend
