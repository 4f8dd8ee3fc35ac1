// ucx_plan.h — the ucx backend's plan of one operation: the kit's plan (the core's, or
// computed by kit::plan_op for a caller without a core) plus the limits only ucx has.
//
//   Status st = plan_ucx_op(op, rank, size, &op->plan);  // once, when the op is issued
//   if (plan.in_place) ...                               // input already sits in output
#ifndef PROCGROUP_BACKENDS_UCX_UCX_PLAN_H_
#define PROCGROUP_BACKENDS_UCX_UCX_PLAN_H_

#include "procgroup/procgroup_backend_kit.hpp"
#include "ucx_status.h"

namespace procgroup::ucx_backend {

using Plan = kit::Plan;

// kit::plan_op, then what ucx alone refuses: CUDA buffers (PG_ERR_UNSUPPORTED) and counts
// whose byte sizes could overflow. Messages start with op_label(op).
Status plan_ucx_op(const pg_backend_op_t& op, int rank, int size, Plan* plan);

}  // namespace procgroup::ucx_backend

#endif  // PROCGROUP_BACKENDS_UCX_UCX_PLAN_H_
