// Statuses and messages of the nccl backend (see nccl_status.h).
#include "nccl_status.h"

namespace procgroup::nccl_backend {

std::string op_label(const pg_backend_op_t& op) {
  if (op.op == PG_OP_SEND || op.op == PG_OP_RECV) {
    return std::string(op_name(op.op)) + (op.op == PG_OP_SEND ? " to rank " : " from rank ") +
           std::to_string(op.peer) + " (tag " + std::to_string(op.tag) + ")";
  }
  return std::string(op_name(op.op)) + " #" + std::to_string(op.seq);
}

std::string cuda_error_text(cudaError_t err) {
  return std::string(cudaGetErrorString(err)) + " (" + cudaGetErrorName(err) + ")";
}

Status cuda_status(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return {};
  (void)cudaGetLastError();  // a non-sticky error must not surface again in a later check
  const pg_status_t code = err == cudaErrorMemoryAllocation ? PG_ERR_OUT_OF_MEMORY : PG_ERR_BACKEND;
  return nccl_error(code, what + ": " + cuda_error_text(err));
}

pg_status_t nccl_code(ncclResult_t result) {
  switch (result) {
    case ncclRemoteError: return PG_ERR_PEER_LOST;
    // The caller's mistake as NCCL saw it (e.g. a send to itself without a matching recv).
    case ncclInvalidUsage:
    case ncclInvalidArgument: return PG_ERR_INVALID_ARGUMENT;
    default: return PG_ERR_BACKEND;
  }
}

std::string nccl_error_text(ncclResult_t result, ncclComm_t comm) {
  std::string text = ncclGetErrorString(result);
  const char* detail = ncclGetLastError(comm);
  if (detail != nullptr && detail[0] != '\0') text += " (" + std::string(detail) + ")";
  return text;
}

Status count_devices(int* count) {
  *count = 0;
  const cudaError_t err = cudaGetDeviceCount(count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    *count = 0;
    return nccl_error(PG_ERR_UNSUPPORTED,
                         "no CUDA device: cudaGetDeviceCount failed: " + cuda_error_text(err));
  }
  if (*count <= 0) {
    return nccl_error(PG_ERR_UNSUPPORTED, "no CUDA device: cudaGetDeviceCount found 0 devices");
  }
  return {};
}

}  // namespace procgroup::nccl_backend
