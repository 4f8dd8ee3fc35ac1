// gloo_plan.h — the gloo backend's plan of one operation: the kit's plan (the core's, or
// computed by kit::plan_op for a caller without a core) plus the limits only gloo has; and
// what every file of the backend shares (the kit's names, Gloo's deadlines and timeouts).
//
//   Plan plan;
//   PG_KIT_TRY(plan_gloo_op(op, rank, size, &plan));  // once, when the op is issued
//   auto work = std::make_shared<Work>(op, plan, tag, deadline);  // the plan travels along
#ifndef PROCGROUP_BACKENDS_GLOO_GLOO_PLAN_H_
#define PROCGROUP_BACKENDS_GLOO_GLOO_PLAN_H_

#include <algorithm>
#include <chrono>
#include <string>

#include "procgroup/procgroup_backend_kit.hpp"

namespace procgroup::gloo_backend {

using Status = kit::Status;
using Plan = kit::Plan;
using kit::Clock;
using kit::op_label;  // "allreduce #12": how messages name an operation

// The time left until deadline, for Gloo's waits (which take a duration): at least 1 ms.
inline std::chrono::milliseconds left_until(Clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
}

// Whether a Gloo exception's text reports a timeout ("Read timeout", "Timed out waiting").
inline bool is_timeout(const std::string& what) {
  return what.find("imeout") != std::string::npos || what.find("imed out") != std::string::npos;
}

// kit::plan_op, then what gloo alone refuses: CUDA buffers (PG_ERR_UNSUPPORTED), a
// send/recv to itself (PG_ERR_UNSUPPORTED) or on a tag gloo reserves, and counts whose
// byte sizes could overflow. Messages start with op_label(op).
Status plan_gloo_op(const pg_backend_op_t& op, int rank, int size, Plan* plan);

}  // namespace procgroup::gloo_backend

#endif  // PROCGROUP_BACKENDS_GLOO_GLOO_PLAN_H_
