// gloo_plan.h — argument checks and in-place resolution for the gloo backend's operations.
//
// A Plan says where this rank's data is for one operation after the in-place forms of
// procgroup.h (the comment above pg_allreduce) are resolved: n elements per rank, the input
// (or, in place, where the input already sits), the output.
//
//   Status st = validate_op(op, rank, size);      // on the caller's thread, when issued
//   Plan plan;
//   st = make_plan(op, rank, size, &plan);        // again where the op runs
#ifndef PROCGROUP_BACKENDS_GLOO_GLOO_PLAN_H_
#define PROCGROUP_BACKENDS_GLOO_GLOO_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "procgroup/procgroup_backend_kit.hpp"

namespace procgroup::gloo_backend {

// The backend's internal result: PG_OK or an error status with its message.
using Status = kit::Status;

// Where one rank's data lives for an operation, after in-place forms are resolved.
struct Plan {
  pg_dtype_t dtype = PG_DTYPE_INVALID;
  size_t es = 0;   // bytes per element
  uint64_t n = 0;  // elements per rank (per block)
  const std::byte* in = nullptr;
  std::byte* out = nullptr;
  bool in_place = false;  // the input already is where the op expects it in out
  size_t bytes() const { return static_cast<size_t>(n) * es; }
};
// "allreduce", "send", ...; "unknown" for anything else.
const char* op_name(pg_op_t op);

// "allreduce #12": how messages name an operation.
std::string op_label(const pg_backend_op_t& op);

// Counts, dtypes and in-place forms; PG_ERR_UNSUPPORTED for CUDA buffers.
Status make_plan(const pg_backend_op_t& op, int rank, int size, Plan* plan);

// make_plan plus roots, peers, reduce ops and size limits. Messages start with op_label.
Status validate_op(const pg_backend_op_t& op, int rank, int size);

}  // namespace procgroup::gloo_backend

#endif  // PROCGROUP_BACKENDS_GLOO_GLOO_PLAN_H_
