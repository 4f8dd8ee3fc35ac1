// Argument checks and in-place resolution for the ucx backend (see ucx_plan.h).
#include "ucx_plan.h"

#include <limits>
#include <string>

#include "ucx_reduce.h"

namespace procgroup::ucx_backend {

const char* op_name(pg_op_t op) {
  static const char* const kNames[PG_OP_COUNT_] = {
      "allreduce", "broadcast", "reduce", "allgather", "reduce_scatter", "gather", "scatter",
      "alltoall",  "barrier",   "send",   "recv"};
  return op >= 0 && op < PG_OP_COUNT_ ? kNames[op] : "unknown";
}

std::string op_label(const pg_backend_op_t& op) {
  return std::string(op_name(op.op)) + " #" + std::to_string(op.seq);
}

namespace {

Status invalid(const pg_backend_op_t& op, const std::string& what) {
  return Status::error(PG_ERR_INVALID_ARGUMENT, op_label(op) + ": " + what);
}

bool present(const pg_buffer_t& b) { return b.data != nullptr || b.count != 0; }
std::byte* bytes_of(const pg_buffer_t& b) { return static_cast<std::byte*>(b.data); }

class Resolver {
 public:
  Resolver(const pg_backend_op_t& op, int rank, int size, Plan* plan)
      : op_(op), rank_(rank), size_(size), p_(plan) {}

  Status run();

 private:
  // Checks a buffer the operation uses and folds its dtype into the plan.
  Status use(const pg_buffer_t& b, const char* which) {
    if (!present(b)) return {};
    if (b.struct_size < sizeof(pg_buffer_t))
      return invalid(op_, std::string(which) + " struct_size is too small");
    if (b.device_type != PG_DEVICE_CPU) {
      return Status::error(PG_ERR_UNSUPPORTED,
                           op_label(op_) +
                               ": the ucx backend handles CPU buffers only; use "
                               "PROCGROUP_BACKEND=nccl for CUDA buffers");
    }
    if (dtype_size(b.dtype) == 0) {
      return invalid(op_, std::string(which) + " has invalid dtype " + std::to_string(b.dtype));
    }
    if (b.count > 0 && b.data == nullptr) {
      return invalid(op_,
                     std::string(which) + " has count " + std::to_string(b.count) + " but no data");
    }
    if (typed_ && p_->dtype != b.dtype) {
      return invalid(op_, std::string("input and output disagree on dtype (") +
                              dtype_name(p_->dtype) + " vs " + dtype_name(b.dtype) + ")");
    }
    typed_ = true;
    p_->dtype = b.dtype;
    p_->es = dtype_size(b.dtype);
    return {};
  }

  Status count_is(const char* which, uint64_t got, uint64_t want) {
    if (got == want) return {};
    return invalid(op_, std::string(which) + " count " + std::to_string(got) + ", expected " +
                            std::to_string(want));
  }

  Status per_rank(const char* which, uint64_t count) {
    if (count % static_cast<uint64_t>(size_) != 0) {
      return invalid(op_, std::string(which) + " count " + std::to_string(count) +
                              " is not a multiple of the group size " + std::to_string(size_));
    }
    p_->n = count / static_cast<uint64_t>(size_);
    return {};
  }

  Status whole();      // allreduce, broadcast, alltoall, reduce
  Status gathered();   // allgather, gather
  Status scattered();  // reduce_scatter, scatter
  Status p2p();

  const pg_backend_op_t& op_;
  const int rank_;
  const int size_;
  Plan* p_;
  bool typed_ = false;
};

Status Resolver::run() {
  switch (op_.op) {
    case PG_OP_ALLREDUCE:
    case PG_OP_BROADCAST:
    case PG_OP_ALLTOALL:
    case PG_OP_REDUCE: return whole();
    case PG_OP_ALLGATHER:
    case PG_OP_GATHER: return gathered();
    case PG_OP_REDUCE_SCATTER:
    case PG_OP_SCATTER: return scattered();
    case PG_OP_BARRIER: return {};
    case PG_OP_SEND:
    case PG_OP_RECV: return p2p();
    default: return invalid(op_, "unknown operation " + std::to_string(op_.op));
  }
}

Status Resolver::whole() {
  const pg_buffer_t& in = op_.input;
  const pg_buffer_t& out = op_.output;
  const bool root = op_.root == rank_;
  const bool same = !present(in) || in.data == out.data;
  Status st;
  if (op_.op == PG_OP_REDUCE && !root) {
    const pg_buffer_t& src = present(in) ? in : out;  // in place: the data is in output
    if (!(st = use(src, "input")).ok()) return st;
    p_->n = src.count;
    p_->in = bytes_of(src);
    return {};
  }
  if (!(st = use(out, "output")).ok()) return st;
  const bool in_used = op_.op != PG_OP_BROADCAST || root;
  if (in_used && !same && !(st = use(in, "input")).ok()) return st;
  p_->n = out.count;
  if (op_.op == PG_OP_ALLTOALL && !(st = per_rank("output", out.count)).ok()) return st;
  p_->out = bytes_of(out);
  p_->in_place = !in_used || same;
  p_->in = p_->in_place ? p_->out : bytes_of(in);
  if (p_->in_place) return {};
  if (!(st = count_is("input", in.count, out.count)).ok()) return st;
  const std::byte* a = p_->in;
  const std::byte* b = p_->out;
  const size_t len = static_cast<size_t>(out.count) * p_->es;
  if (len > 0 && a < b + len && b < a + len) return invalid(op_, "input overlaps output");
  return {};
}

Status Resolver::gathered() {
  const pg_buffer_t& in = op_.input;
  const pg_buffer_t& out = op_.output;
  Status st;
  if (op_.op == PG_OP_GATHER && op_.root != rank_) {
    if (!(st = use(in, "input")).ok()) return st;
    p_->n = in.count;
    p_->in = bytes_of(in);
    return {};
  }
  if (!(st = use(out, "output")).ok()) return st;
  if (!(st = per_rank("output", out.count)).ok()) return st;
  p_->out = bytes_of(out);
  std::byte* mine = p_->out == nullptr ? nullptr : p_->out + rank_ * p_->bytes();
  p_->in_place = !present(in) || in.data == mine;
  if (p_->in_place) {
    p_->in = mine;
    return {};
  }
  if (!(st = use(in, "input")).ok()) return st;
  p_->in = bytes_of(in);
  if (!(st = count_is("input", in.count, p_->n)).ok()) return st;
  const size_t len = p_->bytes(), total = len * size_;
  if (len > 0 && p_->in < p_->out + total && p_->out < p_->in + len) {
    return invalid(op_, "input overlaps output");
  }
  return {};
}

Status Resolver::scattered() {
  const pg_buffer_t& in = op_.input;
  const pg_buffer_t& out = op_.output;
  Status st;
  if (op_.op == PG_OP_SCATTER && op_.root != rank_) {
    if (!(st = use(out, "output")).ok()) return st;
    p_->n = out.count;
    p_->out = bytes_of(out);
    return {};
  }
  if (!(st = use(in, "input")).ok()) return st;
  if (!(st = per_rank("input", in.count)).ok()) return st;
  p_->in = bytes_of(in);
  std::byte* mine = in.data == nullptr ? nullptr : bytes_of(in) + rank_ * p_->bytes();
  p_->in_place = !present(out) || out.data == mine;
  if (p_->in_place) {
    p_->out = mine;
    return {};
  }
  if (!(st = use(out, "output")).ok()) return st;
  p_->out = bytes_of(out);
  if (!(st = count_is("output", out.count, p_->n)).ok()) return st;
  const size_t len = p_->bytes(), total = len * size_;
  if (len > 0 && p_->in < p_->out + len && p_->out < p_->in + total) {
    return invalid(op_, "output overlaps input");
  }
  return {};
}

Status Resolver::p2p() {
  const bool send = op_.op == PG_OP_SEND;
  // Accept the buffer in either slot; the documented one wins when both are present.
  const pg_buffer_t& b = send ? (present(op_.input) ? op_.input : op_.output)
                              : (present(op_.output) ? op_.output : op_.input);
  Status st = use(b, "buffer");
  if (!st.ok()) return st;
  p_->n = b.count;
  p_->out = bytes_of(b);
  p_->in = p_->out;
  return {};
}

}  // namespace

Status validate_op(const pg_backend_op_t& op, int rank, int size, Plan* plan) {
  const bool rooted = op.op == PG_OP_BROADCAST || op.op == PG_OP_REDUCE || op.op == PG_OP_GATHER ||
                      op.op == PG_OP_SCATTER;
  const bool reducing =
      op.op == PG_OP_ALLREDUCE || op.op == PG_OP_REDUCE || op.op == PG_OP_REDUCE_SCATTER;
  if (rooted && (op.root < 0 || op.root >= size)) {
    return invalid(
        op, "root " + std::to_string(op.root) + " is outside the group of " + std::to_string(size));
  }
  if (reducing && (op.reduce_op < 0 || op.reduce_op >= PG_REDUCE_COUNT_)) {
    return invalid(op, "invalid reduce op " + std::to_string(op.reduce_op));
  }
  if ((op.op == PG_OP_SEND || op.op == PG_OP_RECV) && (op.peer < 0 || op.peer >= size)) {
    return invalid(
        op, "peer " + std::to_string(op.peer) + " is outside the group of " + std::to_string(size));
  }
  *plan = Plan{};
  Status st = Resolver(op, rank, size, plan).run();
  if (!st.ok()) return st;
  const uint64_t limit = std::numeric_limits<size_t>::max() / 16 / static_cast<uint64_t>(size);
  if (plan->n > limit) return invalid(op, "count " + std::to_string(plan->n) + " is too large");
  return {};
}

}  // namespace procgroup::ucx_backend
