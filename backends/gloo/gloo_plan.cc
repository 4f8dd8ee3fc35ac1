// The gloo backend's plan of one operation (see gloo_plan.h).
#include "gloo_plan.h"

#include <string>

#include "gloo_p2p.h"

namespace procgroup::gloo_backend {

Status plan_gloo_op(const pg_backend_op_t& op, int rank, int size, Plan* plan) {
  // 8: the most bytes per element and rank of any buffer an op handles.
  PG_KIT_TRY(kit::plan_cpu_op(op, rank, size, "gloo", 8, plan));
  auto invalid = [&](const std::string& what) {
    return Status::error(PG_ERR_INVALID_ARGUMENT, op_label(op) + ": " + what);
  };
  if (kit::op_info(op.op).p2p) {
    if (!p2p_tag_allowed(op.tag)) return invalid("tag " + std::to_string(op.tag) + " is reserved");
    if (op.peer == rank) {
      return Status::error(PG_ERR_UNSUPPORTED,
                           op_label(op) + ": gloo backend cannot send to or receive from itself");
    }
  }
  return {};
}

}  // namespace procgroup::gloo_backend
