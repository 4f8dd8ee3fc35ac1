#include "procgroup/ddp/broadcast.h"

#include <algorithm>
#include <exception>
#include <vector>

#include "device.h"
#include "host_collective.h"
#include "procgroup/ddp/error.h"

namespace procgroup::ddp {
namespace {

// A run of same-dtype tensors on one device broadcast as one buffer.
struct Chunk {
  pg_dtype_t dtype;
  Device device;
  std::vector<const TensorRef*> members;
  size_t bytes = 0;
  detail::DeviceMemory flat;  // empty when a single member is sent in place
  Work work;
  bool staged = false;  // CPU chunk on a backend without CPU buffers: sent through a device
};

std::vector<Chunk> plan(std::span<const TensorRef> tensors, size_t bucket_bytes) {
  std::vector<std::pair<pg_dtype_t, Device>> kinds;
  for (const TensorRef& t : tensors) {
    const std::pair<pg_dtype_t, Device> kind{t.dtype, t.device};
    if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) kinds.push_back(kind);
  }
  std::vector<Chunk> chunks;
  for (const auto& [dtype, device] : kinds) {
    Chunk current{dtype, device, {}, 0, {}, {}};
    for (const TensorRef& t : tensors) {
      if (t.dtype != dtype || t.device != device || t.numel == 0) continue;
      if (!current.members.empty() && current.bytes + t.bytes() > bucket_bytes) {
        chunks.push_back(std::move(current));
        current = Chunk{dtype, device, {}, 0, {}, {}};
      }
      current.members.push_back(&t);
      current.bytes += t.bytes();
    }
    if (!current.members.empty()) chunks.push_back(std::move(current));
  }
  return chunks;
}

void check_tensors(std::span<const TensorRef> tensors) {
  for (const TensorRef& t : tensors) {
    if (element_size(t.dtype) == 0 || (t.numel > 0 && t.data == nullptr)) {
      throw Error(PG_ERR_INVALID_ARGUMENT, "broadcast: a tensor has no data or an invalid dtype");
    }
    detail::check_device(t.device);
    const std::string why = detail::pointer_problem(t.device, t.numel > 0 ? t.data : nullptr);
    if (!why.empty()) {
      throw Error(PG_ERR_INVALID_ARGUMENT, "broadcast: a tensor declared on " +
                                               detail::device_name(t.device) + " " + why);
    }
  }
}

}  // namespace

size_t broadcast_tensors(const Group& group, std::span<const TensorRef> tensors, int root,
                         size_t bucket_bytes, void* cuda_stream) {
  check_tensors(tensors);
  std::vector<Chunk> chunks = plan(tensors, bucket_bytes);
  const bool is_root = group.rank() == root;
  const bool cpu_ok = detail::backend_has_cpu(group);
  detail::Exec via{};  // a device for CPU chunks when the backend has no CPU buffers
  for (const TensorRef& t : tensors) {
    if (t.device.type != PG_DEVICE_CPU) via = {t.device, cuda_stream};
  }
  for (Chunk& c : chunks) {
    const detail::Exec exec{c.device, cuda_stream};
    void* data = c.members.front()->data;
    if (c.members.size() > 1) {
      c.flat = detail::DeviceMemory(exec, c.bytes);
      if (is_root) {
        size_t at = 0;
        for (const TensorRef* t : c.members) {
          detail::copy(exec, static_cast<unsigned char*>(c.flat.data()) + at, t->data, t->bytes());
          at += t->bytes();
        }
      }
      data = c.flat.data();
    }
    c.staged = c.device.type == PG_DEVICE_CPU && !cpu_ok;
    if (c.staged) continue;  // below, synchronously, after the asynchronous ones
    const TensorRef whole{data, c.bytes / element_size(c.dtype), c.dtype, c.device};
    const pg_buffer_t b = whole.buffer(cuda_stream);
    c.work = group.run(pg_broadcast, nullptr, &b, op_options(ReduceOp::kSum, root));
  }
  // Wait for all before rethrowing: a pending broadcast may still write into a chunk.
  std::exception_ptr failure;
  for (Chunk& c : chunks) {
    try {
      if (c.staged) {
        void* data = c.flat.data() ? c.flat.data() : c.members.front()->data;
        const pg_buffer_t b = pg_buffer_cpu(data, c.bytes / element_size(c.dtype), c.dtype);
        detail::run_host_collective(group, pg_broadcast, nullptr, b,
                                    op_options(ReduceOp::kSum, root), via);
      } else {
        c.work.wait();  // CUDA: the result is now visible to every stream
      }
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  for (Chunk& c : chunks) {
    if (is_root || c.flat.data() == nullptr) continue;
    const detail::Exec exec{c.device, cuda_stream};
    size_t at = 0;
    for (const TensorRef* t : c.members) {
      detail::copy(exec, t->data, static_cast<unsigned char*>(c.flat.data()) + at, t->bytes());
      at += t->bytes();
    }
  }
  return chunks.size();
}

size_t broadcast_parameters(const Group& group, std::span<const Parameter> params, int root,
                            size_t bucket_bytes, void* cuda_stream) {
  std::vector<TensorRef> values;
  values.reserve(params.size());
  for (const Parameter& p : params) values.push_back(p.values());
  return broadcast_tensors(group, values, root, bucket_bytes, cuda_stream);
}

}  // namespace procgroup::ddp
