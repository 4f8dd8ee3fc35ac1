// backend_kit/ops.hpp — one operation's plan: where this rank's data is, n elements per
// rank per block, and whether it is in place. The core computes it once (make_op_args uses
// shape_op below) and hands it to plugins in pg_backend_op_t (block_count, in_place);
// plan_op reads it from there, or computes and validates it for a caller that has no core
// (tests calling a plugin directly) or an older core whose ops end before those fields.
//
//   kit::Plan plan;
//   PG_KIT_TRY(kit::plan_op(*op, rank, size, &plan));  // the op table and names: op_table.hpp
//   std::memcpy(plan.out + rank * plan.bytes(), plan.in, plan.bytes());  // allgather
//
// Plan per operation (size ranks, this rank `rank`):
//   allreduce, broadcast, reduce: in and out hold n elements; alltoall: size*n each.
//   allgather, gather (root): out holds size*n, in is n (in place: in == out + rank*n).
//   reduce_scatter, scatter (root): in holds size*n, out is n (in place: out == in + rank*n).
//   Non-roots: reduce and gather have only in, scatter only out; broadcast's in == out.
//   send, recv: in == out == the one buffer.  barrier: n == 0, dtype u8, no buffers.
#ifndef PROCGROUP_BACKEND_KIT_OPS_HPP_
#define PROCGROUP_BACKEND_KIT_OPS_HPP_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "procgroup/backend_kit/dtype.hpp"
#include "procgroup/backend_kit/op_table.hpp"
#include "procgroup/backend_kit/status.hpp"
#include "procgroup/procgroup_backend.h"

namespace procgroup::kit {

struct Plan {
  pg_dtype_t dtype = PG_DTYPE_U8;  // u8 for an operation without buffers (a barrier)
  size_t es = 1;                   // bytes per element
  uint64_t n = 0;                  // elements per rank per block
  const std::byte* in = nullptr;   // this rank's contribution (in place: inside out)
  std::byte* out = nullptr;        // where this rank's result goes (NULL: it has none)
  bool in_place = false;           // the input already sits where the output wants it
  size_t bytes() const { return static_cast<size_t>(n) * es; }
};

// How an error message names the operation: "allreduce" (the core, for the user) or
// "allreduce #12" (a plugin). Built only when a message is.
struct OpLabel {
  const char* name;
  uint64_t seq = 0;
  bool numbered = false;
  std::string text() const {
    return numbered ? std::string(name) + " #" + std::to_string(seq) : std::string(name);
  }
};

// An operation after its in-place forms are resolved (what the core passes a plugin).
struct Shape {
  pg_buffer_t input = absent_buffer();
  pg_buffer_t output = absent_buffer();
  pg_dtype_t dtype = PG_DTYPE_INVALID;
  pg_device_type_t device = PG_DEVICE_CPU;
  uint64_t n = 0;
  bool in_place = false;

  static constexpr pg_buffer_t absent_buffer() {
    return pg_buffer_t{
        sizeof(pg_buffer_t), PG_DTYPE_INVALID, nullptr, 0, PG_DEVICE_CPU, 0, nullptr};
  }
};

// A buffer the caller passed; absent ones are all zero (data NULL, count 0, no dtype).
constexpr bool buffer_present(const pg_buffer_t& b) {
  return b.data != nullptr || b.count != 0 || b.dtype != PG_DTYPE_INVALID;
}

// The first buffer op passes that is not on `device` (NULL: none): how a plugin that takes
// one kind of memory refuses the rest before planning.
constexpr const pg_buffer_t* buffer_off_device(const pg_backend_op_t& op, pg_device_type_t device) {
  for (const pg_buffer_t* b : {&op.input, &op.output})
    if (buffer_present(*b) && b->device_type != device) return b;
  return nullptr;
}

namespace detail {

inline Status invalid(const OpLabel& who, const std::string& what) {
  return Status::error(PG_ERR_INVALID_ARGUMENT, who.text() + ": " + what);
}

// Addresses compared as integers: no pointer arithmetic on NULL.
inline uintptr_t address(const pg_buffer_t& b, uint64_t elements, size_t es) {
  return reinterpret_cast<uintptr_t>(b.data) + static_cast<uintptr_t>(elements * es);
}

// What every plan needs first: an operation, and a rank of a group of at least one.
inline Status check_header(const pg_backend_op_t& op, int rank, int size, const OpLabel& who) {
  if (!op_valid(op.op)) return invalid(who, "unknown operation " + std::to_string(op.op));
  if (size < 1 || rank < 0 || rank >= size)
    return invalid(who, "rank " + std::to_string(rank) + " of a group of size " +
                            std::to_string(size) + " is impossible");
  return {};
}

inline bool overlap(const pg_buffer_t& a, const pg_buffer_t& b, size_t es) {
  if (a.data == nullptr || b.data == nullptr || a.count == 0 || b.count == 0) return false;
  return address(a, 0, es) < address(b, b.count, es) && address(b, 0, es) < address(a, a.count, es);
}

}  // namespace detail

// Reduce op, root and peer of the operations that have them.
inline Status check_op_fields(const OpInfo& info, int32_t reduce_op, int32_t root, int32_t peer,
                              int size, const OpLabel& who) {
  // Messages are built only on failure: this runs for every operation.
  const auto not_a_rank = [&](const char* what, int32_t value) {
    return detail::invalid(who, std::string(what) + " " + std::to_string(value) +
                                    " is not a rank of this group (size " + std::to_string(size) +
                                    ")");
  };
  if (info.reducing && !reduce_op_valid(reduce_op))
    return detail::invalid(who, "invalid reduce op " + std::to_string(reduce_op));
  if (info.rooted && (root < 0 || root >= size)) return not_a_rank("root", root);
  if (info.p2p && (peer < 0 || peer >= size)) return not_a_rank("peer", peer);
  return {};
}

// One buffer this rank passes (struct_size, dtype, device, data and count).
inline Status check_buffer(const OpLabel& who, const char* which, const pg_buffer_t& b) {
  const auto bad = [&](const std::string& what) {
    return detail::invalid(who, std::string(which) + " buffer " + what);
  };
  if (b.struct_size < sizeof(pg_buffer_t))
    return bad("has struct_size " + std::to_string(b.struct_size));
  if (!dtype_valid(b.dtype)) return bad("has invalid dtype " + std::to_string(b.dtype));
  if (b.device_type < 0 || b.device_type >= PG_DEVICE_COUNT_)
    return bad("has invalid device type " + std::to_string(b.device_type));
  if (b.data == nullptr && b.count > 0)
    return bad("data is NULL but count is " + std::to_string(b.count));
  if (b.count > (uint64_t{1} << 56))
    return bad("count " + std::to_string(b.count) + " is implausibly large");
  return {};
}

// Forgets the buffers this rank does not pass (a non-root's broadcast input, gather
// output, ...), whatever they hold. A non-root's reduce output is kept: in place, the
// data is there.
constexpr void select_buffers(const OpInfo& info, bool is_root, const pg_buffer_t** input,
                              const pg_buffer_t** output) {
  if (!info.reads_input(is_root)) *input = nullptr;
  const bool holds_input = info.reads_input(is_root) && info.input_in_output() &&
                           info.input_blocks == info.output_blocks;
  if (!info.writes_output(is_root) && !holds_input) *output = nullptr;
}

// Validates the buffers of one operation (NULL: not passed; select_buffers already
// applied) and resolves its in-place forms, as procgroup.h defines them. Root, reduce op
// and peer are checked by check_op_fields.
inline Status shape_op(const OpInfo& info, const pg_buffer_t* input, const pg_buffer_t* output,
                       int rank, int size, int32_t root, const OpLabel& who, Shape* s) {
  *s = Shape{};
  const bool is_root = info.rooted && root == rank;
  select_buffers(info, is_root, &input, &output);
  const bool writes = info.writes_output(is_root);
  if (writes && output == nullptr) return detail::invalid(who, "output buffer is NULL");
  const bool from_output = input == nullptr && output != nullptr && info.input_in_output();
  if (info.reads_input(is_root) && input == nullptr && !from_output)
    return detail::invalid(who, "input buffer is NULL");
  if (input == nullptr && output == nullptr) return {};  // a barrier
  if (input != nullptr) PG_KIT_TRY(check_buffer(who, "input", *input));
  if (output != nullptr) PG_KIT_TRY(check_buffer(who, "output", *output));
  if (input != nullptr && output != nullptr) {
    if (input->dtype != output->dtype)
      return detail::invalid(who, std::string("input dtype ") + dtype_name(input->dtype) +
                                      " differs from output dtype " + dtype_name(output->dtype));
    if (input->device_type != output->device_type || input->device_index != output->device_index)
      return detail::invalid(who, "input and output are on different devices");
  }
  const pg_buffer_t& any = output != nullptr ? *output : *input;
  s->dtype = any.dtype;
  s->device = any.device_type;
  const size_t es = dtype_size(s->dtype);
  const uint64_t in_blocks = blocks(info.input_blocks, size);
  const uint64_t out_blocks = blocks(info.output_blocks, size);
  // n comes from the buffer this rank writes, else from the one it reads.
  const pg_buffer_t& defining = writes ? *output : (input != nullptr ? *input : *output);
  const uint64_t defining_blocks = writes ? out_blocks : in_blocks;
  if (defining.count % defining_blocks != 0)
    return detail::invalid(who, std::string(writes ? "output" : "input") + " count " +
                                    std::to_string(defining.count) +
                                    " is not a multiple of the group size " + std::to_string(size));
  s->n = defining.count / defining_blocks;
  if (writes) s->output = *output;
  const uint64_t at = info.in_place_at_rank() ? static_cast<uint64_t>(rank) * s->n : 0;
  if (input != nullptr) {
    s->input = *input;
  } else if (from_output) {
    s->input = *output;
    s->input.data =
        output->data == nullptr ? nullptr : static_cast<std::byte*>(output->data) + at * es;
    s->input.count = in_blocks * s->n;
  }
  if (input != nullptr && input->count != in_blocks * s->n)
    return detail::invalid(who, "input count is " + std::to_string(input->count) + " but must be " +
                                    std::to_string(in_blocks * s->n));
  if (!buffer_present(s->input) || !buffer_present(s->output)) return {};
  // Overlap is only allowed in the exact in-place forms.
  if (info.output_in_input()) {
    s->in_place = detail::address(s->output, 0, es) == detail::address(s->input, at, es);
  } else {
    s->in_place = detail::address(s->input, 0, es) == detail::address(s->output, at, es);
  }
  if (!s->in_place && detail::overlap(s->input, s->output, es))
    return detail::invalid(who,
                           "input and output overlap but are not this operation's in-place form "
                           "(see procgroup.h)");
  return {};
}

// The plan of a shaped operation (send/recv: in and out both point at the one buffer).
inline Plan plan_of(const OpInfo& info, const Shape& s) {
  Plan p;
  if (s.dtype == PG_DTYPE_INVALID) return p;  // no buffers
  p.dtype = s.dtype;
  p.es = dtype_size(s.dtype);
  p.n = s.n;
  p.in = static_cast<const std::byte*>(s.input.data);
  p.out = static_cast<std::byte*>(s.output.data);
  if (info.p2p) {
    p.out = static_cast<std::byte*>(info.op == PG_OP_SEND ? s.input.data : s.output.data);
    p.in = p.out;
  }
  p.in_place = s.in_place;
  return p;
}

// Computes and validates op's plan from its buffers alone, ignoring any planned fields.
inline Status compute_plan(const pg_backend_op_t& op, int rank, int size, Plan* plan) {
  *plan = Plan{};
  const OpLabel who{op_name(op.op), op.seq, true};
  PG_KIT_TRY(detail::check_header(op, rank, size, who));
  const OpInfo& info = op_info(op.op);
  PG_KIT_TRY(check_op_fields(info, op.reduce_op, op.root, op.peer, size, who));
  Shape s;
  PG_KIT_TRY(shape_op(info, buffer_present(op.input) ? &op.input : nullptr,
                      buffer_present(op.output) ? &op.output : nullptr, rank, size, op.root, who,
                      &s));
  *plan = plan_of(info, s);
  return {};
}

// op's plan: the core's (block_count, in_place), when op is long enough to carry them,
// checked only against the buffer counts; computed and validated otherwise.
inline Status plan_op(const pg_backend_op_t& op, int rank, int size, Plan* plan) {
  if (op.struct_size < PG_BACKEND_OP_PLAN_SIZE) return compute_plan(op, rank, size, plan);
  *plan = Plan{};
  const OpLabel who{op_name(op.op), op.seq, true};
  PG_KIT_TRY(detail::check_header(op, rank, size, who));
  const OpInfo& info = op_info(op.op);
  const bool has_in = buffer_present(op.input), has_out = buffer_present(op.output);
  if (!has_in && !has_out) return {};
  // Cheap agreement with the buffers: catches a plan left zero by a caller without a core.
  const auto agrees = [&](const pg_buffer_t& b, Blocks kind) {
    const uint64_t k = blocks(kind, size);
    return b.count % k == 0 && b.count / k == op.block_count;
  };
  if ((has_out && !agrees(op.output, info.output_blocks)) ||
      (has_in && !agrees(op.input, info.input_blocks)) || op.in_place > 1)
    return detail::invalid(who, "the planned block_count " + std::to_string(op.block_count) +
                                    " / in_place " + std::to_string(op.in_place) +
                                    " do not fit its buffers (fill them with kit::fill_plan, or "
                                    "give struct_size < PG_BACKEND_OP_PLAN_SIZE)");
  Shape s;
  s.input = op.input;
  s.output = op.output;
  s.dtype = (has_out ? op.output : op.input).dtype;
  s.n = op.block_count;
  s.in_place = op.in_place != 0;
  if (!dtype_valid(s.dtype))
    return detail::invalid(who, "invalid dtype " + std::to_string(s.dtype));
  *plan = plan_of(info, s);
  return {};
}

// PG_ERR_INVALID_ARGUMENT "allreduce #3: count N is too large" unless n * size * per_element
// bytes fit a size_t (per_element: the most bytes per element and rank the plugin's largest
// buffer or scratch takes).
inline Status check_count_fits(const pg_backend_op_t& op, const Plan& plan, int size,
                               uint64_t per_element) {
  const uint64_t limit =
      std::numeric_limits<size_t>::max() / per_element / static_cast<uint64_t>(size);
  if (plan.n <= limit) return {};
  return Status::error(PG_ERR_INVALID_ARGUMENT,
                       op_label(op) + ": count " + std::to_string(plan.n) + " is too large");
}

// "f32 x 1000, sum, root 0": the arguments every rank must pass alike to a collective, for
// messages (the reduce op and root only where op uses them; a barrier has none to show).
inline std::string describe_args(pg_op_t op, pg_dtype_t dtype, uint64_t n, int32_t reduce_op,
                                 int32_t root) {
  const OpInfo& info = op_info(op);
  std::string text = std::string(dtype_name(dtype)) + " x " + std::to_string(n);
  if (info.reducing) text += std::string(", ") + reduce_op_name(reduce_op);
  if (info.rooted) text += ", root " + std::to_string(root);
  return text;
}

// plan_op for a plugin that handles CPU memory only (backend: its name, for the message): a
// buffer on another device is PG_ERR_UNSUPPORTED, pointing to the nccl backend, and counts
// that fail check_count_fits(per_element) are refused.
inline Status plan_cpu_op(const pg_backend_op_t& op, int rank, int size, const char* backend,
                          uint64_t per_element, Plan* plan) {
  if (buffer_off_device(op, PG_DEVICE_CPU) != nullptr) {
    return Status::error(PG_ERR_UNSUPPORTED, op_label(op) + ": the " + backend +
                                                 " backend handles CPU buffers only; use "
                                                 "PROCGROUP_BACKEND=nccl for CUDA buffers");
  }
  PG_KIT_TRY(plan_op(op, rank, size, plan));
  return check_count_fits(op, *plan, size, per_element);
}

// For callers without a core (tests calling a plugin directly): validates op, fills its
// planned fields as the core would, and makes struct_size cover them.
inline Status fill_plan(pg_backend_op_t* op, int rank, int size) {
  Plan plan;
  PG_KIT_TRY(compute_plan(*op, rank, size, &plan));
  op->struct_size = sizeof(pg_backend_op_t);
  op->block_count = plan.n;
  op->in_place = plan.in_place ? 1u : 0u;
  op->reserved1 = 0;
  return {};
}

}  // namespace procgroup::kit

#endif  // PROCGROUP_BACKEND_KIT_OPS_HPP_
