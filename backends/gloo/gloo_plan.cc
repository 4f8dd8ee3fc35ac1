// Argument checks and in-place resolution for the gloo backend (see gloo_plan.h).
#include "gloo_plan.h"

#include <limits>

#include "gloo_dtype.h"
#include "gloo_p2p.h"

namespace procgroup::gloo_backend {

std::string op_label(const pg_backend_op_t& op) {
  return std::string(op_name(op.op)) + " #" + std::to_string(op.seq);
}

namespace {

Status invalid(const pg_backend_op_t& op, const std::string& what) {
  return Status::error(PG_ERR_INVALID_ARGUMENT, op_label(op) + ": " + what);
}

bool present(const pg_buffer_t& b) { return b.data != nullptr || b.count != 0; }
std::byte* bytes_of(const pg_buffer_t& b) { return static_cast<std::byte*>(b.data); }

// Checks one buffer the operation uses and folds its dtype into the plan.
Status use_buffer(const pg_backend_op_t& op, const pg_buffer_t& b, const char* which, Plan* plan) {
  if (!present(b)) return {};
  if (b.device_type != PG_DEVICE_CPU) {
    return Status::error(PG_ERR_UNSUPPORTED, op_label(op) +
                                                 ": gloo backend handles CPU buffers only; use "
                                                 "PROCGROUP_BACKEND=nccl for CUDA buffers");
  }
  if (dtype_size(b.dtype) == 0) {
    return invalid(op, std::string(which) + " has invalid dtype " + std::to_string(b.dtype));
  }
  if (b.count > 0 && b.data == nullptr) {
    return invalid(op,
                   std::string(which) + " has count " + std::to_string(b.count) + " but no data");
  }
  if (plan->dtype != PG_DTYPE_INVALID && plan->dtype != b.dtype) {
    return invalid(op, std::string("input and output disagree on dtype (") +
                           dtype_name(plan->dtype) + " vs " + dtype_name(b.dtype) + ")");
  }
  plan->dtype = b.dtype;
  plan->es = dtype_size(b.dtype);
  return {};
}

Status expect_count(const pg_backend_op_t& op, const char* which, uint64_t got, uint64_t want) {
  if (got == want) return {};
  return invalid(op, std::string(which) + " count " + std::to_string(got) + ", expected " +
                         std::to_string(want));
}

// Splits a size*n buffer into n per rank.
Status per_rank(const pg_backend_op_t& op, const char* which, uint64_t count, int size,
                uint64_t* n) {
  if (count % static_cast<uint64_t>(size) != 0) {
    return invalid(op, std::string(which) + " count " + std::to_string(count) +
                           " is not a multiple of the group size " + std::to_string(size));
  }
  *n = count / static_cast<uint64_t>(size);
  return {};
}

}  // namespace

// Resolves counts and in-place forms (procgroup.h, above pg_allreduce).
Status make_plan(const pg_backend_op_t& op, int rank, int size, Plan* p) {
  const pg_buffer_t& in = op.input;
  const pg_buffer_t& out = op.output;
  const bool root = op.root == rank;
  Status st;
  auto use = [&](const pg_buffer_t& b, const char* which) { return use_buffer(op, b, which, p); };
  auto same = [&]() { return !present(in) || in.data == out.data; };
  switch (op.op) {
    case PG_OP_ALLREDUCE:
    case PG_OP_ALLTOALL:
    case PG_OP_BROADCAST: {
      const bool in_used = op.op != PG_OP_BROADCAST || root;
      if (!(st = use(out, "output")).ok()) return st;
      if (in_used && !same() && !(st = use(in, "input")).ok()) return st;
      p->n = out.count;
      if (op.op == PG_OP_ALLTOALL && !(st = per_rank(op, "output", out.count, size, &p->n)).ok())
        return st;
      p->out = bytes_of(out);
      p->in_place = !in_used || same();
      p->in = p->in_place ? p->out : bytes_of(in);
      if (!p->in_place) return expect_count(op, "input", in.count, out.count);
      return {};
    }
    case PG_OP_REDUCE: {
      if (root) {
        if (!(st = use(out, "output")).ok()) return st;
        if (!same() && !(st = use(in, "input")).ok()) return st;
        p->n = out.count;
        p->out = bytes_of(out);
        p->in_place = same();
        p->in = p->in_place ? p->out : bytes_of(in);
        if (!p->in_place) return expect_count(op, "input", in.count, out.count);
        return {};
      }
      const pg_buffer_t& src = present(in) ? in : out;  // in place: the data is in output
      if (!(st = use(src, "input")).ok()) return st;
      p->n = src.count;
      p->in = bytes_of(src);
      return {};
    }
    case PG_OP_ALLGATHER:
    case PG_OP_GATHER: {
      if (op.op == PG_OP_GATHER && !root) {
        if (!(st = use(in, "input")).ok()) return st;
        p->n = in.count;
        p->in = bytes_of(in);
        return {};
      }
      if (!(st = use(out, "output")).ok()) return st;
      if (!(st = per_rank(op, "output", out.count, size, &p->n)).ok()) return st;
      p->out = bytes_of(out);
      std::byte* mine = p->out == nullptr ? nullptr : p->out + rank * p->bytes();
      p->in_place = !present(in) || in.data == mine;
      if (p->in_place) {
        p->in = mine;
        return {};
      }
      if (!(st = use(in, "input")).ok()) return st;
      if (in.data == out.data) return invalid(op, "input overlaps output");
      p->in = bytes_of(in);
      return expect_count(op, "input", in.count, p->n);
    }
    case PG_OP_REDUCE_SCATTER:
    case PG_OP_SCATTER: {
      if (op.op == PG_OP_SCATTER && !root) {
        if (!(st = use(out, "output")).ok()) return st;
        p->n = out.count;
        p->out = bytes_of(out);
        return {};
      }
      if (!(st = use(in, "input")).ok()) return st;
      if (!(st = per_rank(op, "input", in.count, size, &p->n)).ok()) return st;
      p->in = bytes_of(in);
      std::byte* mine = in.data == nullptr ? nullptr : bytes_of(in) + rank * p->bytes();
      p->in_place = !present(out) || out.data == mine;
      if (p->in_place) {
        p->out = mine;
        return {};
      }
      if (!(st = use(out, "output")).ok()) return st;
      if (in.data == out.data && rank != 0) return invalid(op, "output overlaps input");
      p->out = bytes_of(out);
      return expect_count(op, "output", out.count, p->n);
    }
    case PG_OP_BARRIER: return {};
    case PG_OP_SEND:
    case PG_OP_RECV: {
      const bool use_in = op.op == PG_OP_SEND ? present(in) : !present(out);
      const pg_buffer_t& b = use_in ? in : out;
      if (!(st = use(b, "buffer")).ok()) return st;
      p->n = b.count;
      p->out = bytes_of(b);
      p->in = p->out;
      return {};
    }
    default:
      return Status::error(PG_ERR_INVALID_ARGUMENT,
                           "gloo: unknown operation " + std::to_string(op.op));
  }
}

const char* op_name(pg_op_t op) {
  static const char* const kNames[PG_OP_COUNT_] = {
      "allreduce", "broadcast", "reduce", "allgather", "reduce_scatter", "gather", "scatter",
      "alltoall",  "barrier",   "send",   "recv"};
  return op >= 0 && op < PG_OP_COUNT_ ? kNames[op] : "unknown";
}

Status validate_op(const pg_backend_op_t& op, int rank, int size) {
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
  if (op.op == PG_OP_SEND || op.op == PG_OP_RECV) {
    if (op.peer < 0 || op.peer >= size) {
      return invalid(op, "peer " + std::to_string(op.peer) + " is outside the group of " +
                             std::to_string(size));
    }
    if (!p2p_tag_allowed(op.tag)) {
      return invalid(op, "tag " + std::to_string(op.tag) + " is reserved");
    }
    if (op.peer == rank) {
      return Status::error(PG_ERR_UNSUPPORTED, op_label(op) +
                                                   ": gloo backend cannot send to or receive from "
                                                   "itself");
    }
  }
  Plan plan;
  Status st = make_plan(op, rank, size, &plan);
  if (!st.ok()) return st;
  const uint64_t limit = std::numeric_limits<size_t>::max() / 8 / static_cast<uint64_t>(size);
  if (plan.n > limit) return invalid(op, "count " + std::to_string(plan.n) + " is too large");
  return {};
}

}  // namespace procgroup::gloo_backend
