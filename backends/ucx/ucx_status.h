// ucx_status.h — the ucx backend's internal result type and the names used in messages.
//
//   Status st = Status::error(PG_ERR_PEER_LOST, "allreduce #3: connection to rank 1 lost");
//   if (!st.ok()) return st;
//   UCX_CO_TRY(co_await io);   // inside a coroutine: co_return the error, if any
#ifndef PROCGROUP_BACKENDS_UCX_UCX_STATUS_H_
#define PROCGROUP_BACKENDS_UCX_UCX_STATUS_H_

#include <chrono>
#include <string>
#include <utility>

#include "procgroup/procgroup_backend.h"

namespace procgroup::ucx_backend {

using Clock = std::chrono::steady_clock;

// PG_OK or an error status with its message (never thrown).
struct Status {
  pg_status_t code = PG_OK;
  std::string message;
  bool ok() const { return code == PG_OK; }
  static Status error(pg_status_t code, std::string message) {
    return Status{code, std::move(message)};
  }
};

// "allreduce", "send", ...; "unknown" for anything else.
const char* op_name(pg_op_t op);

// "allreduce #12": how messages name an operation.
std::string op_label(const pg_backend_op_t& op);

}  // namespace procgroup::ucx_backend

// Early return of a failed Status from a coroutine (the co_ counterpart of return-if-error).
#define UCX_CO_TRY(expr)                           \
  do {                                             \
    ::procgroup::ucx_backend::Status st_ = (expr); \
    if (!st_.ok()) co_return st_;                  \
  } while (0)

#endif  // PROCGROUP_BACKENDS_UCX_UCX_STATUS_H_
