// broadcast.h — make every rank's parameters (and buffers such as running statistics) equal
// to the root's, in a few large broadcasts instead of one per tensor.
//
// Tensors are grouped by dtype and device (in order of first appearance), packed into flat buffers of
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

// Collective: every rank passes the same list (sizes, dtypes, device types). Returns how
// many broadcasts were issued. CUDA tensors: packing, the broadcasts and unpacking are
// ordered on cuda_stream (NULL: the legacy default stream) and complete in its order when
// this returns. CUDA tensors without CUDA (build or device): ddp::Error
// (PG_ERR_UNSUPPORTED) before any communication.
size_t broadcast_tensors(const Group& group, std::span<const TensorRef> tensors, int root = 0,
                         size_t bucket_bytes = kBroadcastBucketBytes,
                         void* cuda_stream = nullptr);

// The values (Parameter::data) of every parameter.
size_t broadcast_parameters(const Group& group, std::span<const Parameter> params, int root = 0,
                            size_t bucket_bytes = kBroadcastBucketBytes,
                            void* cuda_stream = nullptr);

inline size_t broadcast_buffers(const Group& group, std::span<const TensorRef> buffers,
                                int root = 0, size_t bucket_bytes = kBroadcastBucketBytes,
                                void* cuda_stream = nullptr) {
  return broadcast_tensors(group, buffers, root, bucket_bytes, cuda_stream);
}

}  // namespace procgroup::ddp
