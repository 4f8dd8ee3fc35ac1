#include "core/op_args.h"

#include "common/dtype.h"
#include "core/versioned_struct.h"
#include "procgroup/backend_kit/ops.hpp"
#include "rendezvous/env.h"

namespace procgroup::detail {
namespace {

constexpr int32_t kMaxUserTag = (1 << 30) - 1;

Result<pg_buffer_t> read_buffer(const char* op, const char* which, const pg_buffer_t& b) {
  pg_buffer_t defaults = PG_BUFFER_INIT;
  // The name is formatted only for the error: this runs twice for every operation.
  const std::string what =
      b.struct_size < kBufferV1Size ? fmt::format("{}: {} buffer", op, which) : std::string();
  return read_versioned(b, kBufferV1Size, defaults, what.c_str(),
                        "PG_BUFFER_INIT or pg_buffer_cpu()");
}

Status from_kit(kit::Status status) {
  return status.ok() ? ok_status() : Status(status.code, std::move(status.message));
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
  const kit::OpInfo& info = kit::op_info(op);
  const char* name = info.name;
  if (!kit::op_valid(op)) return make_error(PG_ERR_INTERNAL, "unknown op {}", op);
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
  const kit::OpLabel who{name};
  PG_RETURN_IF_ERROR(from_kit(
      kit::check_op_fields(info, options.reduce_op, options.root, options.peer, size, who)));
  if (info.p2p && (options.tag < 0 || options.tag > kMaxUserTag))
    return make_error(PG_ERR_INVALID_ARGUMENT, "{}: tag {} is outside 0..{}", name, options.tag,
                      kMaxUserTag);
  if (info.input == kit::Ranks::kNone && info.output == kit::Ranks::kNone) return a;  // barrier

  // Only the buffers this rank passes are read, each as exactly the bytes its caller's
  // struct has; the kit's shape_op then checks them and resolves the in-place forms.
  kit::select_buffers(info, info.rooted && options.root == rank, &input, &output);
  pg_buffer_t input_copy, output_copy;
  if (input != nullptr) {
    PG_ASSIGN_OR_RETURN(input_copy, read_buffer(name, "input", *input));
    input = &input_copy;
  }
  if (output != nullptr) {
    PG_ASSIGN_OR_RETURN(output_copy, read_buffer(name, "output", *output));
    output = &output_copy;
  }
  kit::Shape shape;
  PG_RETURN_IF_ERROR(
      from_kit(kit::shape_op(info, input, output, rank, size, options.root, who, &shape)));
  a.input = shape.input;
  a.output = shape.output;
  a.n = shape.n;
  a.in_place = shape.in_place;
  a.dtype = shape.dtype;
  a.device = shape.device;
  return a;
}

pg_backend_op_t backend_op_of(const OpArgs& a, uint64_t seq, int64_t timeout_ms) {
  pg_backend_op_t op{};
  op.struct_size = sizeof(op);
  op.op = a.op;
  op.reduce_op = a.options.reduce_op;
  op.root = a.options.root;
  op.peer = a.options.peer;
  op.tag = static_cast<uint64_t>(a.options.tag);
  op.seq = seq;
  op.timeout_ms = timeout_ms;
  op.input = a.input;
  op.output = a.output;
  op.block_count = a.n;  // the plan, so that the plugin need not derive it again
  op.in_place = a.in_place ? 1u : 0u;
  return op;
}

std::string describe(const OpArgs& args) {
  std::string text =
      kit::describe_args(args.op, args.dtype, args.n, args.options.reduce_op, args.options.root);
  if (kit::op_info(args.op).p2p)
    text += fmt::format(", peer {}, tag {}", args.options.peer, args.options.tag);
  if (args.device != PG_DEVICE_CPU) text += fmt::format(", {}", device_name(args.device));
  return text;
}

}  // namespace procgroup::detail
