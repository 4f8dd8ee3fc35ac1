// The ucx backend's plan of one operation (see ucx_plan.h).
#include "ucx_plan.h"

#include <limits>
#include <string>

namespace procgroup::ucx_backend {

const char* op_name(pg_op_t op) { return kit::op_name(op); }

std::string op_label(const pg_backend_op_t& op) { return kit::op_label(op); }

Status plan_ucx_op(const pg_backend_op_t& op, int rank, int size, Plan* plan) {
  if (kit::buffer_off_device(op, PG_DEVICE_CPU) != nullptr) {
    return Status::error(PG_ERR_UNSUPPORTED, op_label(op) +
                                                 ": the ucx backend handles CPU buffers only; "
                                                 "use PROCGROUP_BACKEND=nccl for CUDA buffers");
  }
  PG_KIT_TRY(kit::plan_op(op, rank, size, plan));
  // n * size * 16 bytes must fit a size_t (the largest scratch an algorithm takes).
  const uint64_t limit = std::numeric_limits<size_t>::max() / 16 / static_cast<uint64_t>(size);
  if (plan->n > limit) {
    return Status::error(PG_ERR_INVALID_ARGUMENT,
                         op_label(op) + ": count " + std::to_string(plan->n) + " is too large");
  }
  return {};
}

}  // namespace procgroup::ucx_backend
