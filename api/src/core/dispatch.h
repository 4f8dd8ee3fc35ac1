// Issues one operation on a group: validates it, gives collectives their sequence number,
// and runs it natively on the backend when the backend declared it (op, dtype, reduce op,
// device), natively with a core fix-up (AVG as SUM then scale; barrier as a one-element
// allreduce), or else emulated over the backend's send/recv by the fallback algorithms.
#pragma once

#include <memory>

#include "core/group.h"
#include "core/op_args.h"

namespace procgroup::detail {

// Starts the operation; *work completes when it does.
Status submit_op(GroupState& group, const OpArgs& args, std::shared_ptr<WorkState>* work);

// For the C entry points: validates, submits and either hands out a work handle or, when
// work_out is NULL, waits for completion.
Status run_op(GroupState& group, pg_op_t op, const pg_buffer_t* input, const pg_buffer_t* output,
              const pg_op_options_t* options, pg_work_t* work_out);

}  // namespace procgroup::detail
