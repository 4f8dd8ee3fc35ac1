// ucx_status.h — the ucx backend's result and plan types (the kit's), names used in messages.
//
//   Status st = Status::error(PG_ERR_PEER_LOST, "allreduce #3: connection to rank 1 lost");
//   if (!st.ok()) return st;
//   PG_KIT_CO_TRY(co_await io);   // inside a coroutine: co_return the error, if any
#ifndef PROCGROUP_BACKENDS_UCX_UCX_STATUS_H_
#define PROCGROUP_BACKENDS_UCX_UCX_STATUS_H_

#include <chrono>

#include "procgroup/procgroup_backend_kit.hpp"

namespace procgroup::ucx_backend {

using Clock = std::chrono::steady_clock;

using Status = kit::Status;
using Plan = kit::Plan;  // an operation's checked arguments (UcxGroup::submit)
using kit::op_label;     // "allreduce #12": how messages name an operation
using kit::op_name;      // "allreduce", "send", ...; "invalid" for anything else

}  // namespace procgroup::ucx_backend

#endif  // PROCGROUP_BACKENDS_UCX_UCX_STATUS_H_
