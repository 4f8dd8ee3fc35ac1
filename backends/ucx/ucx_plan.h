// ucx_plan.h — argument checks and in-place resolution for the ucx backend's operations.
//
// A Plan says where this rank's data is for one operation once the in-place forms of
// procgroup.h (the comment above pg_allreduce) are resolved: n elements per rank (per
// block for allgather, reduce_scatter, gather, scatter, alltoall), the input and output.
//
//   Status st = validate_op(op, rank, size, &plan);   // on the caller's thread, when issued
//   if (plan.in_place) ...                            // input already sits where output wants it
#ifndef PROCGROUP_BACKENDS_UCX_UCX_PLAN_H_
#define PROCGROUP_BACKENDS_UCX_UCX_PLAN_H_

#include <cstddef>
#include <cstdint>

#include "procgroup/procgroup_backend.h"
#include "ucx_status.h"

namespace procgroup::ucx_backend {

struct Plan {
  pg_dtype_t dtype = PG_DTYPE_U8;  // U8 for buffers that carry no dtype (a barrier)
  size_t es = 1;                   // bytes per element
  uint64_t n = 0;                  // elements per rank (per block)
  const std::byte* in = nullptr;   // this rank's contribution (in place: inside out)
  std::byte* out = nullptr;        // where this rank's result goes (null when it has none)
  bool in_place = false;
  size_t bytes() const { return static_cast<size_t>(n) * es; }
};

// Counts, dtypes, roots, peers, reduce ops and in-place forms; PG_ERR_UNSUPPORTED for
// CUDA buffers. Messages start with op_label(op).
Status validate_op(const pg_backend_op_t& op, int rank, int size, Plan* plan);

}  // namespace procgroup::ucx_backend

#endif  // PROCGROUP_BACKENDS_UCX_UCX_PLAN_H_
