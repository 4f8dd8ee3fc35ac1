#include "kernels.h"

#include <cstring>

#include "procgroup/backend_kit/dtype.hpp"
#include "procgroup/ddp/half.h"
#include "procgroup/ddp/tensor.h"

namespace procgroup::ddp {

// The kit's tables (procgroup/backend_kit/dtype.hpp), behind ddp's own names.
size_t element_size(pg_dtype_t dtype) { return kit::dtype_size(dtype); }

const char* dtype_name(pg_dtype_t dtype) { return kit::dtype_name(dtype); }

bool is_floating(pg_dtype_t dtype) { return kit::dtype_is_floating(dtype); }

namespace detail {
namespace {

// Reads element i of a floating buffer as double (exact for every floating dtype).
double load(const void* p, pg_dtype_t dtype, uint64_t i) {
  switch (dtype) {
    case PG_DTYPE_F32: return static_cast<const float*>(p)[i];
    case PG_DTYPE_F64: return static_cast<const double*>(p)[i];
    case PG_DTYPE_F16: return to_float(static_cast<const Half*>(p)[i]);
    default: return to_float(static_cast<const BFloat16*>(p)[i]);
  }
}

void store(void* p, pg_dtype_t dtype, uint64_t i, double v) {
  switch (dtype) {
    case PG_DTYPE_F32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case PG_DTYPE_F64: static_cast<double*>(p)[i] = v; break;
    case PG_DTYPE_F16: static_cast<Half*>(p)[i] = to_half(static_cast<float>(v)); break;
    default: static_cast<BFloat16*>(p)[i] = to_bfloat16(static_cast<float>(v)); break;
  }
}

template <class T, class Load, class Store>
void divide_halves(T* dst, const T* src, uint64_t n, float d, Load to, Store from) {
  for (uint64_t i = 0; i < n; ++i) dst[i] = from(to(src[i]) / d);
}

}  // namespace

void divide_into(void* dst, const void* src, uint64_t n, pg_dtype_t dtype, int divisor) {
  switch (dtype) {
    case PG_DTYPE_F32: {
      const float d = static_cast<float>(divisor);
      auto* out = static_cast<float*>(dst);
      const auto* in = static_cast<const float*>(src);
      for (uint64_t i = 0; i < n; ++i) out[i] = in[i] / d;
      break;
    }
    case PG_DTYPE_F64: {
      const double d = divisor;
      auto* out = static_cast<double*>(dst);
      const auto* in = static_cast<const double*>(src);
      for (uint64_t i = 0; i < n; ++i) out[i] = in[i] / d;
      break;
    }
    case PG_DTYPE_F16:
      divide_halves(
          static_cast<Half*>(dst), static_cast<const Half*>(src), n, static_cast<float>(divisor),
          [](Half h) { return to_float(h); }, [](float f) { return to_half(f); });
      break;
    case PG_DTYPE_BF16:
      divide_halves(
          static_cast<BFloat16*>(dst), static_cast<const BFloat16*>(src), n,
          static_cast<float>(divisor), [](BFloat16 h) { return to_float(h); },
          [](float f) { return to_bfloat16(f); });
      break;
    default: break;  // callers accept floating dtypes only
  }
}

void convert(void* dst, pg_dtype_t dst_dtype, const void* src, pg_dtype_t src_dtype, uint64_t n) {
  if (dst_dtype == src_dtype) {
    if (dst != src) std::memmove(dst, src, n * element_size(dst_dtype));
    return;
  }
  if (src_dtype == PG_DTYPE_F32 && dst_dtype == PG_DTYPE_F16) {  // the hot case of fp16 hooks
    const auto* in = static_cast<const float*>(src);
    auto* out = static_cast<Half*>(dst);
    for (uint64_t i = 0; i < n; ++i) out[i] = to_half(in[i]);
    return;
  }
  for (uint64_t i = 0; i < n; ++i) store(dst, dst_dtype, i, load(src, src_dtype, i));
}

uint64_t fnv1a(const void* data, size_t bytes, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

}  // namespace detail
}  // namespace procgroup::ddp
