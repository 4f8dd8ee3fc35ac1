// broadcast.h — make every rank's parameters (and buffers such as running statistics) equal
// to the root's, in a few large broadcasts instead of one per tensor.
//
// Tensors are grouped by dtype (in order of first appearance), packed into flat buffers of
// up to bucket_bytes, broadcast together (all in flight at once), and unpacked. A tensor
// that fills a buffer on its own is broadcast in place, without a copy.
//
//   ddp::broadcast_parameters(group, params);            // from rank 0, blocking
//   ddp::broadcast_buffers(group, {ddp::TensorRef::of(std::span(running_mean))});
#pragma once

#include <cstddef>
#include <span>

#include "procgroup/ddp/tensor.h"
#include "procgroup/procgroup.hpp"

namespace procgroup::ddp {

constexpr size_t kBroadcastBucketBytes = size_t{64} << 20;

// Collective: every rank passes the same list (sizes and dtypes). Returns how many
// broadcasts were issued. CUDA tensors: ddp::Error (PG_ERR_UNSUPPORTED), before any
// communication.
size_t broadcast_tensors(const Group& group, std::span<const TensorRef> tensors, int root = 0,
                         size_t bucket_bytes = kBroadcastBucketBytes);

// The values (Parameter::data) of every parameter.
size_t broadcast_parameters(const Group& group, std::span<const Parameter> params, int root = 0,
                            size_t bucket_bytes = kBroadcastBucketBytes);

inline size_t broadcast_buffers(const Group& group, std::span<const TensorRef> buffers,
                                int root = 0, size_t bucket_bytes = kBroadcastBucketBytes) {
  return broadcast_tensors(group, buffers, root, bucket_bytes);
}

}  // namespace procgroup::ddp
