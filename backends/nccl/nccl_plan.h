// nccl_plan.h — checks one operation's arguments and maps it onto an NCCL call: which
// buffer NCCL reads and writes, its count, dtype and reduction, and which user streams it
// must start after. Nothing here touches a communicator.
//
//   PG_KIT_TRY(check_buffer_kinds(op));                  // CPU buffer: PG_ERR_UNSUPPORTED
//   Plan plan;
//   PG_KIT_TRY(make_plan(op, rank, size, device, &plan)); // shapes, roots, devices
//   PG_KIT_TRY(check_pointers(op, plan, device));         // cudaPointerGetAttributes
#ifndef PROCGROUP_BACKENDS_NCCL_NCCL_PLAN_H_
#define PROCGROUP_BACKENDS_NCCL_NCCL_PLAN_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <array>
#include <cstddef>

#include "nccl_status.h"
#include "procgroup/procgroup_backend.h"

namespace procgroup::nccl_backend {

// How an average is computed: NCCL 2.28.9's ncclAvg leaves the last element of an odd
// length unwritten at one rank, where the average is the input itself, so one rank copies.
enum class AvgMethod { kNccl, kCopy };
AvgMethod choose_avg(int size);

struct Plan {
  ncclDataType_t dtype = ncclUint8;
  ncclRedOp_t redop = ncclSum;
  bool copy_instead = false;   // the result is the input (an average at one rank)
  const void* send = nullptr;  // what NCCL reads (never NULL for a call NCCL ignores it in)
  void* recv = nullptr;        // what NCCL writes
  size_t count = 0;            // NCCL's count argument (per rank where NCCL says so)
  size_t element_size = 0;
  size_t scratch_bytes = 0;  // > 0: alltoall in place; NCCL reads a copy of the input
  std::array<const pg_buffer_t*, 2> buffers{};  // the buffers this rank passes
  size_t buffer_count = 0;
  std::array<cudaStream_t, 2> streams{};  // their distinct streams (NULL: legacy default)
  size_t stream_count = 0;
  // NCCL's bytes: what a copy at one rank moves.
  size_t bytes() const { return count * element_size; }
};

// The NCCL dtype for a procgroup dtype; false for dtypes NCCL lacks or does not know.
bool nccl_dtype(int32_t dtype, ncclDataType_t* out, size_t* element_size);

// Checks that need no communicator, so they run before the group is touched: every
// buffer the operation uses is CUDA memory of a dtype NCCL has. CPU buffers and unknown
// dtypes are PG_ERR_UNSUPPORTED, malformed ones PG_ERR_INVALID_ARGUMENT.
Status check_buffer_kinds(const pg_backend_op_t& op);

// The rest of the checks for rank `rank` of `size` whose communicator is on `device`
// (reduce op, root, peer, counts, device indices), and the NCCL mapping in *plan.
Status make_plan(const pg_backend_op_t& op, int rank, int size, int device, Plan* plan);

// Every buffer with elements must be device (or managed) memory of `device`. Pointers seen
// valid recently are not asked again (cudaPointerGetAttributes costs a driver call per
// buffer and operation); a stale entry could only let pinned host memory through, which NCCL
// reads and writes correctly, if slowly.
Status check_pointers(const pg_backend_op_t& op, const Plan& plan, int device);

}  // namespace procgroup::nccl_backend

#endif  // PROCGROUP_BACKENDS_NCCL_NCCL_PLAN_H_
