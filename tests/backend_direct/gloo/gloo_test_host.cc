// The gloo direct tests' host: the core's reduce kernels, its own scale_down for every dtype,
// independent f16/bf16 encodings, and the plugin under test (see gloo_test_support.h). The rest is
// plugin_harness.h's.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "gloo_test_support.h"

namespace procgroup::gloo_test {
namespace {

// Integers truncate, floats multiply by 1/divisor: what direct::scale_ref computes.
template <class T>
void scale_typed(void* data, uint64_t count, uint64_t divisor) {
  T* a = static_cast<T*>(data);
  for (uint64_t i = 0; i < count; ++i) a[i] = direct::scale_ref(a[i], divisor);
}

template <uint16_t (*kTo)(double), double (*kFrom)(uint16_t)>
void scale_half(void* data, uint64_t count, uint64_t divisor) {
  auto* a = static_cast<uint16_t*>(data);
  for (uint64_t i = 0; i < count; ++i) {
    a[i] = kTo(static_cast<float>(kFrom(a[i])) * (1.0f / static_cast<float>(divisor)));
  }
}

pg_status_t host_scale_down(void*, void* data, uint64_t count, pg_dtype_t dtype, uint64_t divisor) {
  switch (dtype) {
    case PG_DTYPE_F32: scale_typed<float>(data, count, divisor); return PG_OK;
    case PG_DTYPE_F64: scale_typed<double>(data, count, divisor); return PG_OK;
    case PG_DTYPE_F16: scale_half<to_f16, from_f16>(data, count, divisor); return PG_OK;
    case PG_DTYPE_BF16: scale_half<to_bf16, from_bf16>(data, count, divisor); return PG_OK;
    case PG_DTYPE_I8: scale_typed<int8_t>(data, count, divisor); return PG_OK;
    case PG_DTYPE_U8: scale_typed<uint8_t>(data, count, divisor); return PG_OK;
    case PG_DTYPE_I32: scale_typed<int32_t>(data, count, divisor); return PG_OK;
    case PG_DTYPE_I64: scale_typed<int64_t>(data, count, divisor); return PG_OK;
    default:
      direct::internal::host_set_error(nullptr, "test host: bad dtype");
      return PG_ERR_INVALID_ARGUMENT;
  }
}

// Encodes |value| into an IEEE format with `mant` fraction bits and `ebits` exponent bits.
uint16_t encode(double value, int mant, int ebits) {
  const int bias = (1 << (ebits - 1)) - 1;
  const uint16_t sign = std::signbit(value) ? uint16_t(1u << (mant + ebits)) : 0;
  const uint16_t inf = uint16_t(((1u << ebits) - 1) << mant);
  if (std::isnan(value)) return uint16_t(sign | inf | (1u << (mant - 1)));
  double a = std::fabs(value);
  if (std::isinf(a)) return sign | inf;
  if (a == 0) return sign;
  int e = 0;
  std::frexp(a, &e);
  int exp = std::max(e - 1, 1 - bias);                   // subnormals share the lowest exponent
  double q = std::nearbyint(std::ldexp(a, mant - exp));  // ties to even (default mode)
  if (q >= std::ldexp(1.0, mant + 1)) {
    q /= 2;
    ++exp;
  }
  if (exp > bias) return sign | inf;
  if (q < std::ldexp(1.0, mant)) return uint16_t(sign | static_cast<uint16_t>(q));
  return uint16_t(sign | ((exp + bias) << mant) | (static_cast<uint32_t>(q) - (1u << mant)));
}

double decode(uint16_t bits, int mant, int ebits) {
  const int bias = (1 << (ebits - 1)) - 1;
  const int exp = (bits >> mant) & ((1 << ebits) - 1);
  const double frac = bits & ((1u << mant) - 1);
  const double sign = (bits >> (mant + ebits)) & 1 ? -1.0 : 1.0;
  if (exp == (1 << ebits) - 1) return frac != 0 ? NAN : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(frac, 1 - bias - mant);
  return sign * std::ldexp(frac + std::ldexp(1.0, mant), exp - bias - mant);
}

}  // namespace

const plugin_harness::PluginUnderTest& gloo_plugin() {
  // The plugin reduces with the host's kernels (gloo's reduce function calls reduce_to) and
  // scales AVG through the host: the core's reduce kernels, this file's own scale_down.
  static const pg_host_services_t host = [] {
    pg_host_services_t h = plugin_harness::host_with_core_kernels();
    h.scale_down = &host_scale_down;
    return h;
  }();
  static const plugin_harness::PluginUnderTest plugin = {PG_GLOO_PATH, &host, "gloo", 90};
  return plugin;
}

uint16_t to_f16(double value) { return encode(static_cast<float>(value), 10, 5); }
uint16_t to_bf16(double value) { return encode(static_cast<float>(value), 7, 8); }
double from_f16(uint16_t bits) { return decode(bits, 10, 5); }
double from_bf16(uint16_t bits) { return decode(bits, 7, 8); }

double host_scale(double value, pg_dtype_t dtype, uint64_t divisor) {
  switch (dtype) {
    case PG_DTYPE_F32: return static_cast<float>(value) * (1.0f / static_cast<float>(divisor));
    case PG_DTYPE_F64: return value * (1.0 / static_cast<double>(divisor));
    case PG_DTYPE_F16: return from_f16(to_f16(static_cast<float>(value) * (1.0f / divisor)));
    case PG_DTYPE_BF16: return from_bf16(to_bf16(static_cast<float>(value) * (1.0f / divisor)));
    default: {
      const int64_t truncated = static_cast<int64_t>(value) / static_cast<int64_t>(divisor);
      return static_cast<double>(truncated);
    }
  }
}

}  // namespace procgroup::gloo_test
