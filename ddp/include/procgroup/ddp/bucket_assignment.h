// bucket_assignment.h — how the Reducer groups gradients into buckets.
//
// Gradients are taken in the order they are expected to become ready (reverse registration
// order at first, the observed order after a rebuild). Each bucket holds one dtype on one
// device; per (dtype, device) the first bucket closes at first_bucket_bytes, later ones at
// bucket_cap_bytes. A bucket is closed *before* a gradient would take it past its limit, so
// it never exceeds the limit unless a single gradient does (then that gradient is alone).
//
//   std::vector<size_t> order = ddp::reverse_order(params.size());
//   auto buckets = ddp::assign_buckets(params, order, {.first_bucket_bytes = 1 << 20});
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "procgroup/ddp/tensor.h"

namespace procgroup::ddp {

struct BucketLimits {
  size_t first_bucket_bytes = size_t{1} << 20;
  size_t bucket_cap_bytes = size_t{25} << 20;
};

struct BucketSpec {
  pg_dtype_t dtype = PG_DTYPE_F32;
  Device device{};
  std::vector<size_t> params;  // parameter indices, in ready order
  uint64_t numel = 0;
  size_t bytes = 0;
  friend bool operator==(const BucketSpec&, const BucketSpec&) = default;
};

// n-1, n-2, ..., 0.
std::vector<size_t> reverse_order(size_t n);

// Buckets sorted by the position in `order` of their first gradient, so bucket 0 is the
// one expected to be ready first. `order` must be a permutation of the parameter indices.
std::vector<BucketSpec> assign_buckets(std::span<const Parameter> params,
                                       std::span<const size_t> order, const BucketLimits& limits);

}  // namespace procgroup::ddp
