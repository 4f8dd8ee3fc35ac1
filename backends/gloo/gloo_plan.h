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
#include <cstdint>
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

// Send/recv tags the backend accepts: below 2^61 (users), or the core's [2^62, 2^63 - 8).
inline bool p2p_tag_allowed(uint64_t tag) {
  constexpr uint64_t kUserEnd = uint64_t{1} << 61;
  constexpr uint64_t kCoreBase = uint64_t{1} << 62;
  constexpr uint64_t kCoreEnd = (uint64_t{1} << 63) - 8;
  return tag < kUserEnd || (tag >= kCoreBase && tag < kCoreEnd);
}

// kit::plan_op, then what gloo alone refuses: CUDA buffers (PG_ERR_UNSUPPORTED), a
// send/recv to itself (PG_ERR_UNSUPPORTED) or on a tag gloo reserves, and counts whose
// byte sizes could overflow. Messages start with op_label(op).
inline Status plan_gloo_op(const pg_backend_op_t& op, int rank, int size, Plan* plan) {
  // 8: the most bytes per element and rank of any buffer an op handles.
  PG_KIT_TRY(kit::plan_cpu_op(op, rank, size, "gloo", 8, plan));
  if (!kit::op_info(op.op).p2p) return {};
  if (!p2p_tag_allowed(op.tag)) {
    return Status::error(PG_ERR_INVALID_ARGUMENT,
                         op_label(op) + ": tag " + std::to_string(op.tag) + " is reserved");
  }
  if (op.peer == rank) {
    return Status::error(PG_ERR_UNSUPPORTED,
                         op_label(op) + ": gloo backend cannot send to or receive from itself");
  }
  return {};
}

}  // namespace procgroup::gloo_backend

#endif  // PROCGROUP_BACKENDS_GLOO_GLOO_PLAN_H_
