#include "procgroup/ddp/broadcast.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <vector>

#include "procgroup/ddp/error.h"

namespace procgroup::ddp {
namespace {

// A run of same-dtype tensors broadcast as one buffer.
struct Chunk {
  pg_dtype_t dtype;
  std::vector<const TensorRef*> members;
  size_t bytes = 0;
  std::vector<unsigned char> flat;  // empty when a single member is sent in place
  Work work;
};

std::vector<Chunk> plan(std::span<const TensorRef> tensors, size_t bucket_bytes) {
  std::vector<pg_dtype_t> dtypes;
  for (const TensorRef& t : tensors) {
    if (std::find(dtypes.begin(), dtypes.end(), t.dtype) == dtypes.end()) dtypes.push_back(t.dtype);
  }
  std::vector<Chunk> chunks;
  for (pg_dtype_t dtype : dtypes) {
    Chunk current{dtype, {}, 0, {}, {}};
    for (const TensorRef& t : tensors) {
      if (t.dtype != dtype || t.numel == 0) continue;
      if (!current.members.empty() && current.bytes + t.bytes() > bucket_bytes) {
        chunks.push_back(std::move(current));
        current = Chunk{dtype, {}, 0, {}, {}};
      }
      current.members.push_back(&t);
      current.bytes += t.bytes();
    }
    if (!current.members.empty()) chunks.push_back(std::move(current));
  }
  return chunks;
}

}  // namespace

size_t broadcast_tensors(const Group& group, std::span<const TensorRef> tensors, int root,
                         size_t bucket_bytes) {
  for (const TensorRef& t : tensors) {
    if (t.device.type != PG_DEVICE_CPU) {
      throw Error(PG_ERR_UNSUPPORTED,
                  "broadcast of CUDA tensors is not supported yet (CPU tensors only until "
                  "the NCCL plugin exists)");
    }
    if (element_size(t.dtype) == 0 || (t.numel > 0 && t.data == nullptr)) {
      throw Error(PG_ERR_INVALID_ARGUMENT, "broadcast: a tensor has no data or an invalid dtype");
    }
  }
  std::vector<Chunk> chunks = plan(tensors, bucket_bytes);
  const bool is_root = group.rank() == root;
  for (Chunk& c : chunks) {
    const size_t esize = element_size(c.dtype);
    void* data = c.members.front()->data;
    if (c.members.size() > 1) {
      c.flat.resize(c.bytes);
      if (is_root) {
        size_t at = 0;
        for (const TensorRef* t : c.members) {
          std::memcpy(c.flat.data() + at, t->data, t->bytes());
          at += t->bytes();
        }
      }
      data = c.flat.data();
    }
    const pg_buffer_t b = pg_buffer_cpu(data, c.bytes / esize, c.dtype);
    c.work = group.run(pg_broadcast, nullptr, &b, op_options(ReduceOp::kSum, root));
  }
  // Wait for all before rethrowing: a pending broadcast may still write into a chunk.
  std::exception_ptr failure;
  for (Chunk& c : chunks) {
    try {
      c.work.wait();
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  for (Chunk& c : chunks) {
    if (is_root || c.flat.empty()) continue;
    size_t at = 0;
    for (const TensorRef* t : c.members) {
      std::memcpy(t->data, c.flat.data() + at, t->bytes());
      at += t->bytes();
    }
  }
  return chunks.size();
}

size_t broadcast_parameters(const Group& group, std::span<const Parameter> params, int root,
                            size_t bucket_bytes) {
  std::vector<TensorRef> values;
  values.reserve(params.size());
  for (const Parameter& p : params) values.push_back(p.values());
  return broadcast_tensors(group, values, root, bucket_bytes);
}

}  // namespace procgroup::ddp
