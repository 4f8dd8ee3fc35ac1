// kernels.h — element loops the ddp module needs on raw buffers of a run-time dtype, and a
// small hash. Internal to ddp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "procgroup/procgroup.h"

namespace procgroup::ddp::detail {

// dst[i] = src[i] / divisor, rounded to dtype (halves compute in float). dst may equal src.
void divide_into(void* dst, const void* src, uint64_t n, pg_dtype_t dtype, int divisor);

// dst[i] = src[i] converted between floating dtypes (halves through float).
void convert(void* dst, pg_dtype_t dst_dtype, const void* src, pg_dtype_t src_dtype, uint64_t n);

// FNV-1a, 64 bits; chain calls by passing the previous value as seed.
constexpr uint64_t kFnvSeed = 0xcbf29ce484222325ull;
uint64_t fnv1a(const void* data, size_t bytes, uint64_t seed = kFnvSeed);
inline uint64_t fnv1a(std::string_view s, uint64_t seed = kFnvSeed) {
  return fnv1a(s.data(), s.size(), seed);
}

}  // namespace procgroup::ddp::detail
