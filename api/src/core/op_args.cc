#include "core/op_args.h"

#include <cstring>

#include "common/dtype.h"
#include "core/versioned_struct.h"
#include "rendezvous/env.h"

namespace procgroup::detail {
namespace {

constexpr int32_t kMaxUserTag = (1 << 30) - 1;

bool rooted(pg_op_t op) {
  return op == PG_OP_BROADCAST || op == PG_OP_REDUCE || op == PG_OP_GATHER || op == PG_OP_SCATTER;
}

bool reducing(pg_op_t op) {
  return op == PG_OP_ALLREDUCE || op == PG_OP_REDUCE || op == PG_OP_REDUCE_SCATTER;
}

// Validates one present buffer (already read with read_versioned).
Status check_buffer(const char* op, const char* which, const pg_buffer_t& b) {
  if (!dtype_valid(b.dtype))
    return make_error(PG_ERR_INVALID_ARGUMENT, "{}: {} buffer has invalid dtype {}", op, which,
                      b.dtype);
  if (b.device_type < 0 || b.device_type >= PG_DEVICE_COUNT_)
    return make_error(PG_ERR_INVALID_ARGUMENT, "{}: {} buffer has invalid device type {}", op,
                      which, b.device_type);
  if (b.data == nullptr && b.count > 0)
    return make_error(PG_ERR_INVALID_ARGUMENT, "{}: {} buffer data is NULL but count is {}", op,
                      which, b.count);
  if (b.count > (uint64_t{1} << 56))
    return make_error(PG_ERR_INVALID_ARGUMENT, "{}: {} buffer count {} is implausibly large", op,
                      which, b.count);
  return ok_status();
}

Result<pg_buffer_t> read_buffer(const char* op, const char* which, const pg_buffer_t& b) {
  pg_buffer_t defaults = PG_BUFFER_INIT;
  return read_versioned(b, kBufferV1Size, defaults,
                        fmt::format("{}: {} buffer", op, which).c_str(),
                        "PG_BUFFER_INIT or pg_buffer_cpu()");
}

const uint8_t* bytes_at(const pg_buffer_t& b, uint64_t elements) {
  return static_cast<const uint8_t*>(b.data) + elements * dtype_size(b.dtype);
}

bool overlap(const pg_buffer_t& a, const pg_buffer_t& b) {
  if (a.data == nullptr || b.data == nullptr || a.count == 0 || b.count == 0) return false;
  auto a0 = static_cast<const uint8_t*>(a.data), b0 = static_cast<const uint8_t*>(b.data);
  return a0 < bytes_at(b, b.count) && b0 < bytes_at(a, a.count);
}

Status count_error(const char* op, const char* what, uint64_t got, uint64_t want) {
  return make_error(PG_ERR_INVALID_ARGUMENT, "{}: {} is {} but must be {}", op, what, got, want);
}

Status not_multiple_error(const char* op, uint64_t got, int size) {
  return make_error(PG_ERR_INVALID_ARGUMENT,
                    "{}: output count {} is not a multiple of the group size {}", op, got, size);
}

}  // namespace

Result<pg_op_options_t> read_op_options(const pg_op_options_t* options) {
  pg_op_options_t defaults = PG_OP_OPTIONS_INIT;
  if (options == nullptr) return defaults;
  return read_versioned(*options, kOpOptionsV1Size, defaults, "pg_op_options_t",
                        "PG_OP_OPTIONS_INIT");
}

Result<OpArgs> make_op_args(pg_op_t op, const pg_buffer_t* input, const pg_buffer_t* output,
                            const pg_op_options_t& options, int rank, int size) {
  const char* name = op_name(op);
  OpArgs a;
  a.op = op;
  a.options = options;
  if (options.timeout_ms < 0)
    return make_error(PG_ERR_INVALID_ARGUMENT, "{}: timeout_ms is negative ({})", name,
                      options.timeout_ms);
  if (options.timeout_ms > kMaxTimeout.count())
    return make_error(PG_ERR_INVALID_ARGUMENT,
                      "{}: timeout_ms {} is longer than the longest timeout, {} ms (~31 years)",
                      name, options.timeout_ms, kMaxTimeout.count());
  if (reducing(op) && !reduce_op_valid(options.reduce_op))
    return make_error(PG_ERR_INVALID_ARGUMENT, "{}: invalid reduce op {}", name, options.reduce_op);
  if (rooted(op) && (options.root < 0 || options.root >= size))
    return make_error(PG_ERR_INVALID_ARGUMENT, "{}: root {} is not a rank of this group (size {})",
                      name, options.root, size);
  if (op == PG_OP_SEND || op == PG_OP_RECV) {
    if (options.peer < 0 || options.peer >= size)
      return make_error(PG_ERR_INVALID_ARGUMENT,
                        "{}: peer {} is not a rank of this group (size {})", name, options.peer,
                        size);
    if (options.tag < 0 || options.tag > kMaxUserTag)
      return make_error(PG_ERR_INVALID_ARGUMENT, "{}: tag {} is outside 0..{}", name, options.tag,
                        kMaxUserTag);
  }
  if (op == PG_OP_BARRIER) return a;

  const bool is_root = rooted(op) && options.root == rank;
  // Which buffers this rank must pass.
  bool need_output = true, need_input = false;
  switch (op) {
    case PG_OP_SEND:
      need_output = false;
      need_input = true;
      break;
    case PG_OP_REDUCE: need_output = is_root; break;
    case PG_OP_GATHER:
      need_output = is_root;
      need_input = !is_root;
      break;
    case PG_OP_REDUCE_SCATTER: need_input = true; break;
    case PG_OP_SCATTER: need_input = is_root; break;
    default: break;
  }
  if (op == PG_OP_SEND) output = nullptr;
  if (op == PG_OP_RECV || (op == PG_OP_SCATTER && !is_root) || (op == PG_OP_BROADCAST && !is_root))
    input = nullptr;  // not read on this rank
  if (op == PG_OP_GATHER && !is_root) output = nullptr;

  if (need_output && output == nullptr)
    return make_error(PG_ERR_INVALID_ARGUMENT, "{}: output buffer is NULL", name);
  if (need_input && input == nullptr && !(op == PG_OP_GATHER && output != nullptr))
    return make_error(PG_ERR_INVALID_ARGUMENT, "{}: input buffer is NULL", name);
  // Work on copies of exactly the bytes each caller's struct has.
  pg_buffer_t input_copy, output_copy;
  if (input != nullptr) {
    PG_ASSIGN_OR_RETURN(input_copy, read_buffer(name, "input", *input));
    input = &input_copy;
    PG_RETURN_IF_ERROR(check_buffer(name, "input", *input));
  }
  if (output != nullptr) {
    PG_ASSIGN_OR_RETURN(output_copy, read_buffer(name, "output", *output));
    output = &output_copy;
    PG_RETURN_IF_ERROR(check_buffer(name, "output", *output));
  }
  if (input != nullptr && output != nullptr) {
    if (input->dtype != output->dtype)
      return make_error(PG_ERR_INVALID_ARGUMENT, "{}: input dtype {} differs from output dtype {}",
                        name, dtype_name(input->dtype), dtype_name(output->dtype));
    if (input->device_type != output->device_type || input->device_index != output->device_index)
      return make_error(PG_ERR_INVALID_ARGUMENT, "{}: input and output are on different devices",
                        name);
  }
  const pg_buffer_t& any = output != nullptr ? *output : *input;
  a.dtype = any.dtype;
  a.device = any.device_type;
  const uint64_t es = dtype_size(a.dtype);
  const uint64_t world = static_cast<uint64_t>(size);

  // Shapes, and in-place inputs resolved to the address the header defines.
  auto at = [&](const pg_buffer_t& b, uint64_t elements, uint64_t count) {
    pg_buffer_t r = b;
    r.data = b.data == nullptr ? nullptr : static_cast<uint8_t*>(b.data) + elements * es;
    r.count = count;
    return r;
  };
  switch (op) {
    case PG_OP_ALLREDUCE:
    case PG_OP_BROADCAST:
    case PG_OP_ALLTOALL:
      a.output = *output;
      a.input = input != nullptr ? *input : *output;
      if (op == PG_OP_ALLTOALL && output->count % world != 0)
        return not_multiple_error(name, output->count, size);
      if (a.input.count != output->count)
        return count_error(name, "input count", a.input.count, output->count);
      a.n = op == PG_OP_ALLTOALL ? output->count / world : output->count;
      break;
    case PG_OP_SEND:
      a.input = *input;
      a.n = input->count;
      break;
    case PG_OP_RECV:
      a.output = *output;
      a.n = output->count;
      break;
    case PG_OP_REDUCE:
      // Non-roots' output is never written (absent), even when they pass one.
      a.input = input != nullptr ? *input : *output;
      a.n = a.input.count;
      if (is_root) {
        a.output = *output;
        if (output->count != a.n) return count_error(name, "output count", output->count, a.n);
      }
      break;
    case PG_OP_ALLGATHER:
    case PG_OP_GATHER:
      if (output != nullptr) {
        a.output = *output;
        if (output->count % world != 0) return not_multiple_error(name, output->count, size);
        a.n = output->count / world;
        a.input = input != nullptr ? *input : at(*output, rank * a.n, a.n);
        if (a.input.count != a.n) return count_error(name, "input count", a.input.count, a.n);
      } else {
        a.input = *input;
        a.n = input->count;
      }
      break;
    case PG_OP_REDUCE_SCATTER:
    case PG_OP_SCATTER:
      a.output = *output;
      a.n = output->count;
      if (input != nullptr) {
        a.input = *input;
        if (input->count != world * a.n)
          return count_error(name, "input count", input->count, world * a.n);
      }
      break;
    default: return make_error(PG_ERR_INTERNAL, "unknown op {}", op);
  }

  // Overlap is only allowed in the exact in-place forms.
  if (overlap(a.input, a.output)) {
    bool in_place = false;
    switch (op) {
      case PG_OP_ALLGATHER:
      case PG_OP_GATHER: in_place = a.input.data == bytes_at(a.output, rank * a.n); break;
      case PG_OP_REDUCE_SCATTER:
      case PG_OP_SCATTER: in_place = a.output.data == bytes_at(a.input, rank * a.n); break;
      default: in_place = a.input.data == a.output.data; break;
    }
    if (!in_place)
      return make_error(PG_ERR_INVALID_ARGUMENT,
                        "{}: input and output overlap but are not this operation's in-place "
                        "form (see procgroup.h)",
                        name);
  }
  return a;
}

std::string describe(const OpArgs& args) {
  std::string text = fmt::format("{} x {}", dtype_name(args.dtype), args.n);
  if (reducing(args.op)) text += fmt::format(", {}", reduce_op_name(args.options.reduce_op));
  if (rooted(args.op)) text += fmt::format(", root {}", args.options.root);
  if (args.op == PG_OP_SEND || args.op == PG_OP_RECV)
    text += fmt::format(", peer {}, tag {}", args.options.peer, args.options.tag);
  if (args.device != PG_DEVICE_CPU) text += fmt::format(", {}", device_name(args.device));
  return text;
}

}  // namespace procgroup::detail
