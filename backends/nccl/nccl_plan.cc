// Argument checks and the NCCL mapping of one operation (see nccl_plan.h).
#include "nccl_plan.h"

#include <array>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

namespace procgroup::nccl_backend {
namespace {

bool rooted(int32_t op) {
  return op == PG_OP_BROADCAST || op == PG_OP_REDUCE || op == PG_OP_GATHER || op == PG_OP_SCATTER;
}

bool reducing(int32_t op) {
  return op == PG_OP_ALLREDUCE || op == PG_OP_REDUCE || op == PG_OP_REDUCE_SCATTER;
}

// Absent buffers (non-roots) are zero-filled by the core: no data, no count, no dtype.
bool present(const pg_buffer_t& b) {
  return b.data != nullptr || b.count > 0 || b.dtype != PG_DTYPE_INVALID;
}

// Whether the op reads input / writes output whatever the rank (the rest depend on root).
bool always_input(int32_t op) {
  return op != PG_OP_RECV && op != PG_OP_BARRIER && op != PG_OP_BROADCAST && op != PG_OP_SCATTER;
}
bool always_output(int32_t op) {
  return op != PG_OP_SEND && op != PG_OP_BARRIER && op != PG_OP_REDUCE && op != PG_OP_GATHER;
}

Status invalid(const pg_backend_op_t& op, const std::string& what) {
  return Status::error(PG_ERR_INVALID_ARGUMENT, op_label(op) + ": " + what);
}

Status check_kind(const pg_backend_op_t& op, const char* which, const pg_buffer_t& b) {
  if (b.device_type == PG_DEVICE_CPU) {
    return Status::error(PG_ERR_UNSUPPORTED,
                         op_label(op) + ": the " + which +
                             " buffer is CPU memory; the nccl backend takes CUDA device memory "
                             "only (use PROCGROUP_BACKEND=gloo for CPU buffers)");
  }
  if (b.device_type != PG_DEVICE_CUDA) {
    return invalid(op, std::string("the ") + which + " buffer has unknown device type " +
                           std::to_string(b.device_type));
  }
  ncclDataType_t dtype;
  size_t size;
  if (b.dtype == PG_DTYPE_INVALID) {
    return invalid(op, std::string("the ") + which + " buffer has no dtype (PG_DTYPE_INVALID)");
  }
  if (!nccl_dtype(b.dtype, &dtype, &size)) {
    return Status::error(PG_ERR_UNSUPPORTED, op_label(op) + ": dtype " + std::to_string(b.dtype) +
                                                 " of the " + which +
                                                 " buffer is not one NCCL has");
  }
  if (b.data == nullptr && b.count > 0) {
    return invalid(op, std::string("the ") + which + " buffer's data is NULL but its count is " +
                           std::to_string(b.count));
  }
  return {};
}

Status expect_count(const pg_backend_op_t& op, const char* what, uint64_t got, uint64_t want) {
  if (got == want) return {};
  return invalid(op, std::string(what) + " is " + std::to_string(got) + " but must be " +
                         std::to_string(want));
}

bool reduce_op(int32_t op, ncclRedOp_t* out) {
  switch (op) {
    case PG_REDUCE_SUM: *out = ncclSum; return true;
    case PG_REDUCE_AVG: *out = ncclAvg; return true;  // NCCL divides natively (ints truncate)
    case PG_REDUCE_PROD: *out = ncclProd; return true;
    case PG_REDUCE_MIN: *out = ncclMin; return true;
    case PG_REDUCE_MAX: *out = ncclMax; return true;
    default: return false;
  }
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

std::string describe_pointer(const void* p) {
  char text[32];
  std::snprintf(text, sizeof(text), "%p", p);
  return text;
}

}  // namespace

AvgMethod choose_avg(int size) { return size == 1 ? AvgMethod::kCopy : AvgMethod::kNccl; }

bool nccl_dtype(int32_t dtype, ncclDataType_t* out, size_t* element_size) {
  switch (dtype) {
    case PG_DTYPE_F32:
      *out = ncclFloat32;
      *element_size = 4;
      return true;
    case PG_DTYPE_F64:
      *out = ncclFloat64;
      *element_size = 8;
      return true;
    case PG_DTYPE_F16:
      *out = ncclFloat16;
      *element_size = 2;
      return true;
    case PG_DTYPE_BF16:
      *out = ncclBfloat16;
      *element_size = 2;
      return true;
    case PG_DTYPE_I8:
      *out = ncclInt8;
      *element_size = 1;
      return true;
    case PG_DTYPE_U8:
      *out = ncclUint8;
      *element_size = 1;
      return true;
    case PG_DTYPE_I32:
      *out = ncclInt32;
      *element_size = 4;
      return true;
    case PG_DTYPE_I64:
      *out = ncclInt64;
      *element_size = 8;
      return true;
    default: return false;
  }
}

Status check_buffer_kinds(const pg_backend_op_t& op) {
  if (always_input(op.op) || (op.op != PG_OP_RECV && op.op != PG_OP_BARRIER && present(op.input)))
    PG_NCCL_TRY(check_kind(op, "input", op.input));
  if (always_output(op.op) || (op.op != PG_OP_SEND && op.op != PG_OP_BARRIER && present(op.output)))
    PG_NCCL_TRY(check_kind(op, "output", op.output));
  return {};
}

Status make_plan(const pg_backend_op_t& op, int rank, int size, int device, Plan* plan) {
  const int32_t kind = op.op;
  if (reducing(kind) && !reduce_op(op.reduce_op, &plan->redop))
    return invalid(op, "unknown reduce op " + std::to_string(op.reduce_op));
  if (rooted(kind) && (op.root < 0 || op.root >= size))
    return invalid(op, "root " + std::to_string(op.root) + " is not a rank of this group (size " +
                           std::to_string(size) + ")");
  if ((kind == PG_OP_SEND || kind == PG_OP_RECV) && (op.peer < 0 || op.peer >= size))
    return invalid(op, "peer " + std::to_string(op.peer) + " is not a rank of this group (size " +
                           std::to_string(size) + ")");
  if (kind == PG_OP_BARRIER) return {};

  const bool is_root = rooted(kind) && op.root == rank;
  const bool uses_input = always_input(kind) || is_root;
  const bool uses_output = always_output(kind) || is_root;
  const pg_buffer_t* in = uses_input ? &op.input : nullptr;
  const pg_buffer_t* out = uses_output ? &op.output : nullptr;
  for (const pg_buffer_t* b : {in, out}) {
    if (b == nullptr) continue;
    PG_NCCL_TRY(check_kind(op, b == in ? "input" : "output", *b));
    if (b->device_index != device) {
      return invalid(op, std::string("the ") + (b == in ? "input" : "output") +
                             " buffer is on cuda:" + std::to_string(b->device_index) +
                             " but this rank's communicator is on cuda:" + std::to_string(device) +
                             " (chosen from PROCGROUP_NCCL_DEVICE or LOCAL_RANK)");
    }
    plan->buffers[plan->buffer_count++] = b;
    const cudaStream_t s = static_cast<cudaStream_t>(b->stream);
    if (plan->stream_count == 0 || plan->streams[0] != s) plan->streams[plan->stream_count++] = s;
  }
  if (in != nullptr && out != nullptr && in->dtype != out->dtype)
    return invalid(op, "input dtype " + std::to_string(in->dtype) + " differs from output dtype " +
                           std::to_string(out->dtype));
  nccl_dtype((out != nullptr ? out : in)->dtype, &plan->dtype, &plan->element_size);

  const uint64_t world = static_cast<uint64_t>(size);
  plan->send = in != nullptr ? in->data : nullptr;
  plan->recv = out != nullptr ? out->data : nullptr;
  switch (kind) {
    case PG_OP_ALLREDUCE:
      PG_NCCL_TRY(expect_count(op, "the input count", in->count, out->count));
      plan->count = out->count;
      break;
    case PG_OP_BROADCAST:
      if (in != nullptr) PG_NCCL_TRY(expect_count(op, "the input count", in->count, out->count));
      plan->count = out->count;
      break;
    case PG_OP_REDUCE:
      if (out != nullptr) PG_NCCL_TRY(expect_count(op, "the output count", out->count, in->count));
      plan->count = in->count;
      break;
    case PG_OP_ALLGATHER:
    case PG_OP_GATHER:
      if (out != nullptr)
        PG_NCCL_TRY(expect_count(op, "the output count", out->count, world * in->count));
      plan->count = in->count;
      break;
    case PG_OP_REDUCE_SCATTER:
    case PG_OP_SCATTER:
      if (in != nullptr)
        PG_NCCL_TRY(expect_count(op, "the input count", in->count, world * out->count));
      plan->count = out->count;
      break;
    case PG_OP_ALLTOALL:
      PG_NCCL_TRY(expect_count(op, "the input count", in->count, out->count));
      if (out->count % world != 0)
        return invalid(op, "the count " + std::to_string(out->count) +
                               " is not a multiple of the group size " + std::to_string(size));
      plan->count = out->count / world;
      // NCCL's alltoall is not in-place safe: it reads a stream-ordered copy instead.
      if (in->data == out->data && out->count > 0)
        plan->scratch_bytes = out->count * plan->element_size;
      break;
    case PG_OP_SEND: plan->count = in->count; break;
    case PG_OP_RECV: plan->count = out->count; break;
    default: return invalid(op, "unknown operation " + std::to_string(kind));
  }
  // NCCL ignores the buffer of a role a rank does not play, but gets a valid pointer.
  if (plan->send == nullptr) plan->send = plan->recv;
  if (plan->recv == nullptr) plan->recv = const_cast<void*>(plan->send);
  // At one rank every reduction's result is its input; only the average needs the help.
  plan->copy_instead = reducing(kind) && op.reduce_op == PG_REDUCE_AVG &&
                       choose_avg(size) == AvgMethod::kCopy;
  return {};
}

Status check_pointers(const pg_backend_op_t& op, const Plan& plan, int device) {
  for (size_t i = 0; i < plan.buffer_count; ++i) {
    const pg_buffer_t* b = plan.buffers[i];
    if (b->count == 0 || valid_pointers().contains(b->data, device)) continue;
    const char* which = b == &op.input ? "input" : "output";
    cudaPointerAttributes attr{};
    const cudaError_t err = cudaPointerGetAttributes(&attr, b->data);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return invalid(
          op, std::string("the ") + which + " buffer " + describe_pointer(b->data) +
                  " is not CUDA memory (cudaPointerGetAttributes: " + cuda_error_text(err) + ")");
    }
    if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) {
      return invalid(op, std::string("the ") + which + " buffer " + describe_pointer(b->data) +
                             " is " + (attr.type == cudaMemoryTypeHost ? "pinned host" : "host") +
                             " memory, not device memory of cuda:" + std::to_string(device));
    }
    if (attr.device != device) {
      return invalid(op, std::string("the ") + which + " buffer " + describe_pointer(b->data) +
                             " is memory of cuda:" + std::to_string(attr.device) +
                             ", not of cuda:" + std::to_string(device) + " as the buffer says");
    }
    valid_pointers().add(b->data, device);
  }
  return {};
}

}  // namespace procgroup::nccl_backend
