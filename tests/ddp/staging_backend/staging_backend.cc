// A test-only backend plugin that serves CUDA buffers with the loopback plugin (ranks as
// threads of one process): each CUDA buffer is copied to host memory after its stream has
// finished the work enqueued before the operation, loopback computes on the host copies,
// and when the work completes the result is copied back to the device and the device
// synchronised, so it is visible to every stream. That is the nccl plugin's stream contract,
// on one GPU, for any number of ranks — which NCCL itself cannot do (one rank per GPU).
//
// It wraps loopback through the plugin ABI only (dlopen of PG_STAGING_INNER_PLUGIN, then its
// pg_backend_negotiate), so it knows nothing of loopback's internals. Built twice:
// "staging" declares CPU and CUDA buffers; with PG_STAGING_CUDA_ONLY, "staging_cuda"
// declares CUDA only, like NCCL, so ddp's host-side control messages must be staged
// through the device by ddp itself.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "procgroup/procgroup_backend.h"

namespace {

#if defined(PG_STAGING_CUDA_ONLY) && PG_STAGING_CUDA_ONLY
constexpr const char* kName = "staging_cuda";
constexpr uint32_t kDevices = 1u << PG_DEVICE_CUDA;
#else
constexpr const char* kName = "staging";
constexpr uint32_t kDevices = 1u << PG_DEVICE_CPU | 1u << PG_DEVICE_CUDA;
#endif

// Set once by pg_backend_negotiate, before any other entry can be called.
const pg_host_services_t* g_host = nullptr;
const pg_backend_ops_t* g_inner = nullptr;

pg_status_t fail(pg_status_t status, const std::string& message) {
  g_host->set_error(g_host->ctx, (std::string(kName) + ": " + message).c_str());
  return status;
}

pg_status_t cuda_fail(cudaError_t e, const std::string& what) {
  (void)cudaGetLastError();
  return fail(PG_ERR_BACKEND, what + ": " + cudaGetErrorString(e));
}

uint64_t element_size(int32_t dtype) {
  switch (dtype) {
    case PG_DTYPE_F64:
    case PG_DTYPE_I64: return 8;
    case PG_DTYPE_F32:
    case PG_DTYPE_I32: return 4;
    case PG_DTYPE_F16:
    case PG_DTYPE_BF16: return 2;
    default: return 1;
  }
}

bool on_cuda(const pg_buffer_t& b) { return b.device_type == PG_DEVICE_CUDA && b.data; }
uint64_t bytes_of(const pg_buffer_t& b) { return b.count * element_size(b.dtype); }
// Offset of `inner` within `outer`, or -1 when it does not lie inside it.
int64_t offset_in(const pg_buffer_t& inner, const pg_buffer_t& outer) {
  const auto* i = static_cast<const unsigned char*>(inner.data);
  const auto* o = static_cast<const unsigned char*>(outer.data);
  if (i < o || i + bytes_of(inner) > o + bytes_of(outer)) return -1;
  return i - o;
}

struct StagedWork {
  pg_backend_work_t inner = nullptr;
  std::vector<unsigned char> first, second;  // host copies
  pg_buffer_t device_result{};               // data NULL: nothing to copy back
  const void* host_result = nullptr;
  std::mutex mu;
  bool finished = false;
  pg_status_t status = PG_PENDING;
  std::string message;  // our own failure, re-reported on every later call
};

// Completes w once the inner work has: the result goes back to the device.
pg_status_t finish(StagedWork& w, pg_status_t inner_status) {
  std::lock_guard lock(w.mu);
  if (!w.finished) {
    if (inner_status == PG_PENDING) return PG_PENDING;
    w.finished = true;
    w.status = inner_status;
    if (inner_status == PG_OK && w.device_result.data != nullptr) {
      int previous = 0;
      cudaError_t e = cudaGetDevice(&previous);
      if (e == cudaSuccess) e = cudaSetDevice(w.device_result.device_index);
      if (e == cudaSuccess) {
        e = cudaMemcpy(w.device_result.data, w.host_result, bytes_of(w.device_result),
                       cudaMemcpyHostToDevice);
      }
      if (e == cudaSuccess) e = cudaDeviceSynchronize();  // visible to every stream
      (void)cudaSetDevice(previous);
      if (e != cudaSuccess) {
        w.status = PG_ERR_BACKEND;
        w.message = std::string("copying the result to the device: ") + cudaGetErrorString(e);
        (void)cudaGetLastError();
      }
    }
  }
  if (!w.message.empty()) return fail(w.status, w.message);
  return w.status;
}

// Replaces the CUDA buffers of op by host copies owned by w.
pg_status_t stage(pg_backend_op_t& op, StagedWork& w) {
  pg_buffer_t& in = op.input;
  pg_buffer_t& out = op.output;
  const pg_buffer_t& device = on_cuda(out) ? out : in;
  cudaError_t e = cudaSetDevice(device.device_index);
  if (e != cudaSuccess) return cuda_fail(e, "cudaSetDevice");
  // The operation starts after the work already enqueued on each buffer's stream.
  for (const pg_buffer_t* b : {&in, &out}) {
    if (!on_cuda(*b)) continue;
    e = cudaStreamSynchronize(static_cast<cudaStream_t>(b->stream));
    if (e != cudaSuccess) return cuda_fail(e, "cudaStreamSynchronize");
  }
  // One host copy of the enclosing buffer when one lies inside the other (in place,
  // allgather's input inside its output), else one each.
  const bool has_in = on_cuda(in), has_out = on_cuda(out);
  const pg_buffer_t* outer = has_out ? &out : &in;
  if (has_in && has_out && offset_in(out, in) >= 0 && offset_in(in, out) < 0) outer = &in;
  w.first.resize(bytes_of(*outer));
  e = cudaMemcpy(w.first.data(), outer->data, w.first.size(), cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) return cuda_fail(e, "cudaMemcpy to the host");
  const pg_buffer_t original_out = out, original_in = in, original_outer = *outer;
  auto host_view = [&](pg_buffer_t& b, const pg_buffer_t& original) -> pg_status_t {
    if (!on_cuda(original)) return PG_OK;
    const int64_t at = offset_in(original, original_outer);
    if (at >= 0) {
      b.data = w.first.data() + at;
    } else {
      w.second.resize(bytes_of(original));
      const cudaError_t c =
          cudaMemcpy(w.second.data(), original.data, w.second.size(), cudaMemcpyDeviceToHost);
      if (c != cudaSuccess) return cuda_fail(c, "cudaMemcpy to the host");
      b.data = w.second.data();
    }
    b.device_type = PG_DEVICE_CPU;
    b.device_index = 0;
    b.stream = nullptr;
    return PG_OK;
  };
  if (pg_status_t s = host_view(in, original_in); s != PG_OK) return s;
  if (pg_status_t s = host_view(out, original_out); s != PG_OK) return s;
  if (has_out) {
    w.device_result = original_out;
    w.host_result = out.data;
  }
  return PG_OK;
}

pg_backend_op_fn inner_entry(int32_t op) {
  const pg_backend_op_fn entries[PG_OP_COUNT_] = {
      g_inner->allreduce,      g_inner->broadcast, g_inner->reduce,  g_inner->allgather,
      g_inner->reduce_scatter, g_inner->gather,    g_inner->scatter, g_inner->alltoall,
      g_inner->barrier,        g_inner->send,      g_inner->recv};
  return op >= 0 && op < PG_OP_COUNT_ ? entries[op] : nullptr;
}

template <int32_t kOp>
pg_status_t submit(pg_backend_group_t group, const pg_backend_op_t* op, pg_backend_work_t* work) {
  if (op == nullptr || work == nullptr) return fail(PG_ERR_INVALID_ARGUMENT, "NULL op or work");
  auto w = std::make_unique<StagedWork>();
  pg_backend_op_t staged = *op;
  if (on_cuda(op->input) || on_cuda(op->output)) {
    if (pg_status_t s = stage(staged, *w); s != PG_OK) return s;
  }
  const pg_status_t s = inner_entry(kOp)(group, &staged, &w->inner);
  if (s != PG_OK) return s;  // loopback has set the message
  *work = reinterpret_cast<pg_backend_work_t>(w.release());
  return PG_OK;
}

StagedWork* as_work(pg_backend_work_t w) { return reinterpret_cast<StagedWork*>(w); }

pg_status_t work_test(pg_backend_work_t work) {
  StagedWork& w = *as_work(work);
  return finish(w, w.finished ? w.status : g_inner->work_test(w.inner));
}

pg_status_t work_wait(pg_backend_work_t work, int64_t timeout_ms) {
  StagedWork& w = *as_work(work);
  return finish(w, w.finished ? w.status : g_inner->work_wait(w.inner, timeout_ms));
}

void work_release(pg_backend_work_t work) {
  StagedWork* w = as_work(work);
  // loopback may still read or write the host copies: they live until it has finished
  // (every operation does, by its deadline).
  if (!w->finished) (void)g_inner->work_wait(w->inner, -1);
  g_inner->work_release(w->inner);
  delete w;
}

template <int32_t kOp>
pg_backend_op_fn wrapped() {
  return inner_entry(kOp) ? &submit<kOp> : nullptr;
}

pg_backend_ops_t g_ops{};

}  // namespace

extern "C" PG_BACKEND_EXPORT pg_status_t pg_backend_negotiate(const pg_backend_negotiate_in_t* in,
                                                              pg_backend_negotiate_out_t* out) {
  if (in == nullptr || out == nullptr || in->host == nullptr) return PG_ERR_INVALID_ARGUMENT;
  g_host = in->host;
  void* handle = dlopen(PG_STAGING_INNER_PLUGIN, RTLD_NOW | RTLD_LOCAL);  // kept open
  auto* negotiate = handle ? reinterpret_cast<pg_backend_negotiate_fn>(
                                 dlsym(handle, PG_BACKEND_NEGOTIATE_SYMBOL))
                           : nullptr;
  if (negotiate == nullptr) {
    return fail(PG_ERR_BACKEND_NOT_FOUND, std::string("cannot load ") + PG_STAGING_INNER_PLUGIN +
                                              ": " + (handle ? "no negotiate symbol" : dlerror()));
  }
  pg_backend_negotiate_out_t inner{};
  inner.struct_size = sizeof inner;
  if (pg_status_t s = negotiate(in, &inner); s != PG_OK) return s;
  g_inner = inner.ops;
  // Only what the inner table holds: a shorter (older) one has no group_split.
  g_ops = pg_backend_ops_t{};
  std::memcpy(&g_ops, g_inner, std::min<size_t>(g_inner->struct_size, sizeof g_ops));
  g_ops.struct_size = sizeof g_ops;
  g_ops.work_test = &work_test;
  g_ops.work_wait = &work_wait;
  g_ops.work_release = &work_release;
  g_ops.allreduce = wrapped<PG_OP_ALLREDUCE>();
  g_ops.broadcast = wrapped<PG_OP_BROADCAST>();
  g_ops.reduce = wrapped<PG_OP_REDUCE>();
  g_ops.allgather = wrapped<PG_OP_ALLGATHER>();
  g_ops.reduce_scatter = wrapped<PG_OP_REDUCE_SCATTER>();
  g_ops.gather = wrapped<PG_OP_GATHER>();
  g_ops.scatter = wrapped<PG_OP_SCATTER>();
  g_ops.alltoall = wrapped<PG_OP_ALLTOALL>();
  g_ops.barrier = wrapped<PG_OP_BARRIER>();
  g_ops.send = wrapped<PG_OP_SEND>();
  g_ops.recv = wrapped<PG_OP_RECV>();
  out->version = inner.version;
  out->name = kName;
  out->description = "test plugin: loopback with CUDA buffers staged through host memory";
  out->native_ops = inner.native_ops;
  out->native_dtypes = inner.native_dtypes;
  out->native_reduce_ops = inner.native_reduce_ops;
  out->devices = kDevices;
  out->ops = &g_ops;
  return PG_OK;
}
