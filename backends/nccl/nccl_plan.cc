// Argument checks and the NCCL mapping of one operation (see nccl_plan.h). The shapes
// (counts, in-place forms, roots, peers, reduce ops) are the kit's plan, the core's own;
// what is NCCL's is here: CUDA memory of this device, NCCL's dtypes and reductions, streams.
#include "nccl_plan.h"

#include <array>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

#include "procgroup/backend_kit/ops.hpp"

namespace procgroup::nccl_backend {
namespace {

Status invalid(const pg_backend_op_t& op, const std::string& what) {
  return nccl_error(PG_ERR_INVALID_ARGUMENT, op_label(op) + ": " + what);
}

// A buffer's kind: CUDA memory of a dtype NCCL has (CPU: unsupported, with the way out).
Status check_kind(const pg_backend_op_t& op, const char* which, const pg_buffer_t& b) {
  if (b.device_type == PG_DEVICE_CPU) {
    return nccl_error(PG_ERR_UNSUPPORTED,
                         op_label(op) + ": the " + which +
                             " buffer is CPU memory; the nccl backend takes CUDA device memory "
                             "only (use PROCGROUP_BACKEND=gloo for CPU buffers)");
  }
  if (b.device_type != PG_DEVICE_CUDA) {
    return invalid(op, std::string("the ") + which + " buffer has unknown device type " +
                           std::to_string(b.device_type));
  }
  if (b.dtype == PG_DTYPE_INVALID) {
    return invalid(op, std::string("the ") + which + " buffer has no dtype (PG_DTYPE_INVALID)");
  }
  ncclDataType_t dtype;
  size_t size;
  if (!nccl_dtype(b.dtype, &dtype, &size)) {
    return nccl_error(PG_ERR_UNSUPPORTED, op_label(op) + ": dtype " + std::to_string(b.dtype) +
                                                 " of the " + which +
                                                 " buffer is not one NCCL has");
  }
  if (b.data == nullptr && b.count > 0) {
    return invalid(op, std::string("the ") + which + " buffer's data is NULL but its count is " +
                           std::to_string(b.count));
  }
  return {};
}

// The buffers this rank passes (the op table says which), whether or not they hold data.
struct Used {
  const pg_buffer_t* input = nullptr;
  const pg_buffer_t* output = nullptr;
};
Used used_buffers(const pg_backend_op_t& op, int rank) {
  const kit::OpInfo& info = kit::op_info(op.op);
  const bool is_root = info.rooted && op.root == rank;
  return {info.reads_input(is_root) ? &op.input : nullptr,
          info.writes_output(is_root) ? &op.output : nullptr};
}

bool reduce_op(int32_t op, ncclRedOp_t* out) {
  // By pg_reduce_op_t: sum, avg (NCCL divides natively; ints truncate), prod, min, max.
  constexpr ncclRedOp_t kNcclOps[PG_REDUCE_COUNT_] = {ncclSum, ncclAvg, ncclProd, ncclMin, ncclMax};
  if (!kit::reduce_op_valid(op)) return false;
  *out = kNcclOps[op];
  return true;
}

// The last pointers check_pointers found to be device memory, with their device.
class ValidPointers {
 public:
  bool contains(const void* p, int device) {
    std::lock_guard lock(mu_);
    for (const Entry& e : entries_)
      if (e.pointer == p && e.device == device) return true;
    return false;
  }
  void add(const void* p, int device) {
    std::lock_guard lock(mu_);
    entries_[next_] = Entry{p, device};
    next_ = (next_ + 1) % entries_.size();
  }

 private:
  struct Entry {
    const void* pointer = nullptr;
    int device = -1;
  };
  std::mutex mu_;
  std::array<Entry, 16> entries_{};
  size_t next_ = 0;
};

ValidPointers& valid_pointers() {
  static ValidPointers cache;
  return cache;
}

}  // namespace

AvgMethod choose_avg(int size) { return size == 1 ? AvgMethod::kCopy : AvgMethod::kNccl; }

bool nccl_dtype(int32_t dtype, ncclDataType_t* out, size_t* element_size) {
  // By pg_dtype_t: (invalid), f32, f64, f16, bf16, i8, u8, i32, i64; NCCL has every one.
  constexpr ncclDataType_t kNcclTypes[PG_DTYPE_COUNT_] = {
      ncclUint8, ncclFloat32, ncclFloat64, ncclFloat16, ncclBfloat16,
      ncclInt8,  ncclUint8,   ncclInt32,   ncclInt64};
  if (!kit::dtype_valid(dtype)) return false;
  *out = kNcclTypes[dtype];
  *element_size = kit::dtype_size(dtype);
  return true;
}

Status check_buffer_kinds(const pg_backend_op_t& op) {
  const kit::OpInfo& info = kit::op_info(op.op);
  // Before the group is touched: whatever the rank, a buffer it may pass must be CUDA memory.
  if (info.input != kit::Ranks::kNone && (info.input == kit::Ranks::kEvery ||
                                          kit::buffer_present(op.input)))
    PG_KIT_TRY(check_kind(op, "input", op.input));
  if (info.output != kit::Ranks::kNone && (info.output == kit::Ranks::kEvery ||
                                           kit::buffer_present(op.output)))
    PG_KIT_TRY(check_kind(op, "output", op.output));
  return {};
}

Status make_plan(const pg_backend_op_t& op, int rank, int size, int device, Plan* plan) {
  *plan = Plan{};
  if (op.op == PG_OP_BARRIER) return {};
  const Used used = used_buffers(op, rank);
  for (const pg_buffer_t* b : {used.input, used.output}) {
    if (b == nullptr) continue;
    const char* which = b == used.input ? "input" : "output";
    PG_KIT_TRY(check_kind(op, which, *b));
    if (b->device_index != device) {
      return invalid(op, std::string("the ") + which + " buffer is on cuda:" +
                             std::to_string(b->device_index) +
                             " but this rank's communicator is on cuda:" + std::to_string(device) +
                             " (chosen from PROCGROUP_NCCL_DEVICE or LOCAL_RANK)");
    }
    plan->buffers[plan->buffer_count++] = b;
    const cudaStream_t s = static_cast<cudaStream_t>(b->stream);
    if (plan->stream_count == 0 || plan->streams[0] != s) plan->streams[plan->stream_count++] = s;
  }
  kit::Plan shape;
  const kit::Status planned = kit::plan_op(op, rank, size, &shape);
  if (!planned.ok()) return nccl_error(planned.code, planned.message);
  if (kit::op_info(op.op).reducing && !reduce_op(op.reduce_op, &plan->redop))
    return invalid(op, "unknown reduce op " + std::to_string(op.reduce_op));
  nccl_dtype(shape.dtype, &plan->dtype, &plan->element_size);
  // NCCL's count is per rank where NCCL says so, i.e. the plan's n for every operation.
  plan->count = shape.n;
  // NCCL ignores the buffer of a role a rank does not play, but gets a valid pointer.
  plan->send = shape.in != nullptr ? static_cast<const void*>(shape.in) : shape.out;
  plan->recv = shape.out != nullptr ? static_cast<void*>(shape.out)
                                    : const_cast<std::byte*>(shape.in);
  // NCCL's alltoall is not in-place safe: it reads a stream-ordered copy instead.
  if (op.op == PG_OP_ALLTOALL && plan->send == plan->recv && shape.n > 0)
    plan->scratch_bytes = static_cast<size_t>(size) * shape.bytes();
  // At one rank every reduction's result is its input; only the average needs the help.
  plan->copy_instead = kit::op_info(op.op).reducing && op.reduce_op == PG_REDUCE_AVG &&
                       choose_avg(size) == AvgMethod::kCopy;
  return {};
}

Status check_pointers(const pg_backend_op_t& op, const Plan& plan, int device) {
  for (size_t i = 0; i < plan.buffer_count; ++i) {
    const pg_buffer_t* b = plan.buffers[i];
    if (b->count == 0 || valid_pointers().contains(b->data, device)) continue;
    char buffer[64];  // "the input buffer 0x7f..."
    std::snprintf(buffer, sizeof(buffer), "the %s buffer %p", b == &op.input ? "input" : "output",
                  b->data);
    cudaPointerAttributes attr{};
    const cudaError_t err = cudaPointerGetAttributes(&attr, b->data);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return invalid(op, buffer + std::string(" is not CUDA memory (cudaPointerGetAttributes: ") +
                             cuda_error_text(err) + ")");
    }
    if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) {
      return invalid(op, buffer + std::string(" is ") +
                             (attr.type == cudaMemoryTypeHost ? "pinned host" : "host") +
                             " memory, not device memory of cuda:" + std::to_string(device));
    }
    if (attr.device != device) {
      return invalid(op, buffer + std::string(" is memory of cuda:") +
                             std::to_string(attr.device) + ", not of cuda:" +
                             std::to_string(device) + " as the buffer says");
    }
    valid_pointers().add(b->data, device);
  }
  return {};
}

}  // namespace procgroup::nccl_backend
