// gloo_plan.h — the gloo backend's plan of one operation: the kit's plan (the core's, or
// computed by kit::plan_op for a caller without a core) plus the limits only gloo has.
//
//   Plan plan;
//   PG_KIT_TRY(plan_gloo_op(op, rank, size, &plan));  // once, when the op is issued
//   auto work = std::make_shared<Work>(op, plan, tag, deadline);  // the plan travels along
#ifndef PROCGROUP_BACKENDS_GLOO_GLOO_PLAN_H_
#define PROCGROUP_BACKENDS_GLOO_GLOO_PLAN_H_

#include "procgroup/procgroup_backend_kit.hpp"

namespace procgroup::gloo_backend {

using Status = kit::Status;
using Plan = kit::Plan;
using kit::op_label;  // "allreduce #12": how messages name an operation

// kit::plan_op, then what gloo alone refuses: CUDA buffers (PG_ERR_UNSUPPORTED), a
// send/recv to itself (PG_ERR_UNSUPPORTED) or on a tag gloo reserves, and counts whose
// byte sizes could overflow. Messages start with op_label(op).
Status plan_gloo_op(const pg_backend_op_t& op, int rank, int size, Plan* plan);

}  // namespace procgroup::gloo_backend

#endif  // PROCGROUP_BACKENDS_GLOO_GLOO_PLAN_H_
