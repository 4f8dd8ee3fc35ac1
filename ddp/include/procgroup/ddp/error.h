// error.h — the exception every ddp function throws for a misuse or a failed check.
//
// ddp::Error is a procgroup::Error (status + message), so one catch handles both; its
// message starts with "ddp: " and names the parameter, rank or file involved.
//
//   try {
//     reducer.mark_grad_ready(3);
//   } catch (const procgroup::ddp::Error& e) {
//     std::fprintf(stderr, "%s\n", e.what());   // PG_ERR_INVALID_ARGUMENT: ddp: ...
//   }
#pragma once

#include <string>

#include "procgroup/procgroup.hpp"

namespace procgroup::ddp {

// Status used: PG_ERR_INVALID_ARGUMENT (misuse, bad file, mixed devices), PG_ERR_MISMATCH
// (ranks disagree), PG_ERR_UNSUPPORTED (CUDA tensors without CUDA: built without it, or no
// device), PG_ERR_BACKEND (a CUDA call failed; the message has cudaGetErrorString).
class Error : public procgroup::Error {
 public:
  Error(pg_status_t status, const std::string& message)
      : procgroup::Error(status, "ddp: " + message) {}
};

}  // namespace procgroup::ddp
