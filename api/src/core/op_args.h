// Checks a user's operation arguments against the rules in procgroup.h and turns them
// into one normalised form: in-place inputs resolved to their addresses, absent buffers
// as {data NULL, count 0}, defaults filled in. Every rejection names the argument. The
// rules themselves are the backend kit's (kit::shape_op), which plugins' plan_op shares.
#pragma once

#include "common/status.h"
#include "procgroup/procgroup.h"
#include "procgroup/procgroup_backend.h"

namespace procgroup::detail {

struct OpArgs {
  pg_op_t op = PG_OP_BARRIER;
  pg_buffer_t input = PG_BUFFER_INIT;
  pg_buffer_t output = PG_BUFFER_INIT;
  uint64_t n = 0;         // elements per rank per block (the plugin's block_count)
  bool in_place = false;  // input already sits where output wants it (the plugin's in_place)
  pg_dtype_t dtype = PG_DTYPE_U8;
  pg_device_type_t device = PG_DEVICE_CPU;
  pg_op_options_t options = PG_OP_OPTIONS_INIT;
};

// Reads a caller's options struct (NULL: defaults), honouring a smaller struct_size from
// an older caller and rejecting one that is too small to be any version.
Result<pg_op_options_t> read_op_options(const pg_op_options_t* options);

// input/output are the user's pointers (either may be NULL where the op allows).
Result<OpArgs> make_op_args(pg_op_t op, const pg_buffer_t* input, const pg_buffer_t* output,
                            const pg_op_options_t& options, int rank, int size);

// The operation as a plugin receives it, with the plan (block_count, in_place) filled in.
pg_backend_op_t backend_op_of(const OpArgs& args, uint64_t seq, int64_t timeout_ms);

// "f32 x 1024, sum, root 0": the parts of an operation worth printing.
std::string describe(const OpArgs& args);

}  // namespace procgroup::detail
