// nccl_status.h — the nccl backend's result type, and how CUDA and NCCL errors become
// statuses whose messages say which call failed and what the library said.
//
//   Status st = cuda_status(cudaEventRecord(ev, s), "allreduce #3: cudaEventRecord");
//   if (!st.ok()) return st;   // "nccl: allreduce #3: cudaEventRecord: invalid resource handle"
#ifndef PROCGROUP_BACKENDS_NCCL_NCCL_STATUS_H_
#define PROCGROUP_BACKENDS_NCCL_NCCL_STATUS_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <string>
#include <utility>

#include "procgroup/backend_kit/op_table.hpp"
#include "procgroup/backend_kit/status.hpp"
#include "procgroup/procgroup_backend.h"

namespace procgroup::nccl_backend {

using Clock = std::chrono::steady_clock;

// The kit's status; the plugin's own errors start with "nccl: " (nccl_error).
using Status = kit::Status;
inline Status nccl_error(pg_status_t code, std::string message) {
  return Status::error(code, "nccl: " + std::move(message));
}

// A status message without its leading "nccl: " (to quote one inside another).
inline std::string without_prefix(const std::string& message) {
  return message.rfind("nccl: ", 0) == 0 ? message.substr(6) : message;
}

using kit::op_name;

// "allreduce #12" for collectives, "send to rank 1 (tag 7)" for point-to-point.
std::string op_label(const pg_backend_op_t& op);

// "invalid argument (cudaErrorInvalidValue)".
std::string cuda_error_text(cudaError_t err);

// PG_OK for cudaSuccess; otherwise PG_ERR_BACKEND (PG_ERR_OUT_OF_MEMORY for allocation
// failures) naming `what`. Clears CUDA's last (non-sticky) error.
Status cuda_status(cudaError_t err, const std::string& what);

// PG_ERR_PEER_LOST for ncclRemoteError (a peer failed or left), else PG_ERR_BACKEND;
// the message has NCCL's error string and, where it has one, ncclGetLastError's detail.
pg_status_t nccl_code(ncclResult_t result);
std::string nccl_error_text(ncclResult_t result, ncclComm_t comm);

// The number of CUDA devices, or PG_ERR_UNSUPPORTED "no CUDA device: <cuda error>".
Status count_devices(int* count);

}  // namespace procgroup::nccl_backend

#endif  // PROCGROUP_BACKENDS_NCCL_NCCL_STATUS_H_
