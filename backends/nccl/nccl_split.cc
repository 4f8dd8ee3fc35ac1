// group_split with ncclCommSplit (see nccl_group.h). Every rank of the parent calls it,
// PG_SPLIT_NO_COLOR ranks with NCCL_SPLIT_NOCOLOR, because NCCL's split is collective over
// the parent. Non-blocking, as NCCL describes it for ncclCommSplit: the parent stays
// ncclInProgress until the split is done and only then is the new communicator filled in,
// so each rank polls the parent (under its lock: nothing else may run on it meanwhile),
// then waits for the child's handle and polls the child until it is ready.
#include <atomic>
#include <string>

#include "nccl_comm.h"
#include "nccl_cuda.h"
#include "nccl_group.h"

namespace procgroup::nccl_backend {
namespace {

constexpr char kWhat[] = "group_split: ncclCommSplit";

// What ncclCommSplit reads and writes, possibly from NCCL's own thread after a wait gave
// up: on failure the parent keeps it until its communicator is gone (aborting that joins
// NCCL's job), so a late write never lands in freed memory. NCCL may keep config.commName,
// which is the child's own name (the child Comm outlives its communicator).
struct SplitCall {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  std::shared_ptr<Comm> child;  // NULL for NCCL_SPLIT_NOCOLOR
  ncclComm_t made = nullptr;
};

// NCCL writes the child's handle from its own thread once the parent has settled.
Status wait_for_handle(ncclComm_t* made, Clock::time_point deadline, int64_t timeout_ms) {
  Backoff backoff;
  while (std::atomic_ref<ncclComm_t>(*made).load() == nullptr) {
    if (Clock::now() > deadline) {
      return nccl_error(PG_ERR_TIMEOUT, std::string(kWhat) +
                                               ": the new communicator did not appear within " +
                                               std::to_string(timeout_ms) + " ms");
    }
    backoff.pause();
  }
  return {};
}

// The child is ready and NCCL placed this rank where the core did.
Status check_child(ncclComm_t child, const Comm& expected, Clock::time_point deadline) {
  ncclResult_t state = ncclSuccess;
  const ncclResult_t r = ncclCommGetAsyncError(child, &state);
  PG_KIT_TRY(await_nccl(
      child, r != ncclSuccess ? r : state, std::string(kWhat) + " (the new communicator)", deadline,
      [] { return std::optional<Status>(); },
      [&] {
        return nccl_error(PG_ERR_TIMEOUT, std::string(kWhat) +
                                                 ": the new communicator was not ready within " +
                                                 std::to_string(expected.timeout_ms()) + " ms");
      }));
  int rank = -1, size = -1;
  if (ncclCommUserRank(child, &rank) != ncclSuccess || ncclCommCount(child, &size) != ncclSuccess ||
      rank != expected.rank() || size != expected.size()) {
    return nccl_error(PG_ERR_INTERNAL, std::string(kWhat) + " placed this rank at " +
                                              std::to_string(rank) + " of " + std::to_string(size) +
                                              ", not at " + std::to_string(expected.rank()) +
                                              " of " + std::to_string(expected.size()));
  }
  return {};
}

}  // namespace

Status split_communicator(Comm& parent, int32_t color, const pg_backend_group_config_t* c,
                          const pg_host_services_t* host, std::shared_ptr<Comm>* out) {
  const int64_t timeout_ms = c != nullptr ? c->timeout_ms : parent.timeout_ms();
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  parent.flush_p2p();  // sends and recvs issued before the split go first, as for a collective
  DeviceGuard on(parent.device());  // the child lives on the parent's device
  PG_KIT_TRY(on.status());
  auto call = std::make_shared<SplitCall>();
  call->config.blocking = blocking_communicators() ? 1 : 0;
  // No shared resources (whatever NCCL_COMM_SPLIT_SHARE_RESOURCES says): each group must
  // fail, abort and be destroyed alone, in any order, like a created one.
  call->config.splitShare = 0;
  if (c != nullptr) {
    call->child = std::make_shared<Comm>(c->rank, c->size, parent.device(), c->timeout_ms,
                                         std::string(c->group_id != nullptr ? c->group_id : ""));
    // Its own stream and scratch, as a created group's.
    PG_KIT_TRY(call->child->create_resources());
    call->config.commName = call->child->name().c_str();
  }
  const std::shared_ptr<Comm>& child = call->child;
  // The key is the child rank the core computed, so NCCL's order is exactly the core's.
  const int nccl_color = c != nullptr ? color : NCCL_SPLIT_NOCOLOR;
  const int nccl_key = c != nullptr ? c->rank : 0;
  Status st = parent.enqueue([&](ncclComm_t comm, cudaStream_t) {
    return parent.settle(ncclCommSplit(comm, nccl_color, nccl_key, &call->made, &call->config),
                         kWhat, deadline);
  });
  if (st.ok() && child != nullptr) st = wait_for_handle(&call->made, deadline, timeout_ms);
  if (st.ok() && child != nullptr) st = check_child(call->made, *child, deadline);
  if (st.ok() && child == nullptr && call->made != nullptr) {
    st = nccl_error(PG_ERR_INTERNAL, std::string(kWhat) + " made a communicator for a rank " +
                                            "with NCCL_SPLIT_NOCOLOR");
  }
  if (!st.ok()) {
    if (ncclComm_t made = std::atomic_ref<ncclComm_t>(call->made).load()) (void)ncclCommAbort(made);
    parent.keep_until_gone(call);
    return st;
  }
  if (child == nullptr) return {};  // NCCL_SPLIT_NOCOLOR: no group
  child->adopt(call->made);
  if (host != nullptr && host->log != nullptr) {
    const std::string line = "rank " + std::to_string(c->rank) + "/" + std::to_string(c->size) +
                             " of group '" + child->name() +
                             "' on cuda:" + std::to_string(parent.device()) +
                             " (ncclCommSplit of '" + parent.name() + "')";
    host->log(host->ctx, PG_LOG_INFO, "nccl", line.c_str());
  }
  *out = child;
  return {};
}

}  // namespace procgroup::nccl_backend
