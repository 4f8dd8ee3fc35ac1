// The ucx backend's plan of one operation (see ucx_plan.h).
#include "ucx_plan.h"

namespace procgroup::ucx_backend {

Status plan_ucx_op(const pg_backend_op_t& op, int rank, int size, Plan* plan) {
  if (kit::buffer_off_device(op, PG_DEVICE_CPU) != nullptr) {
    return Status::error(PG_ERR_UNSUPPORTED, op_label(op) +
                                                 ": the ucx backend handles CPU buffers only; "
                                                 "use PROCGROUP_BACKEND=nccl for CUDA buffers");
  }
  PG_KIT_TRY(kit::plan_op(op, rank, size, plan));
  return kit::check_count_fits(op, *plan, size, 16);  // the largest scratch an algorithm takes
}

}  // namespace procgroup::ucx_backend
