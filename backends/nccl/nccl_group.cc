// Operations of the nccl backend mapped onto NCCL (see nccl_group.h).
#include "nccl_group.h"

#include <utility>

#include "nccl_cuda.h"
#include "procgroup/backend_kit/entry.hpp"

namespace procgroup::nccl_backend {
namespace {

// The NCCL call for a collective; send and recv are issued by Comm::flush_p2p.
ncclResult_t call_nccl(const pg_backend_op_t& op, const Plan& p, const void* send, ncclComm_t c,
                       cudaStream_t s) {
  switch (op.op) {
    case PG_OP_ALLREDUCE: return ncclAllReduce(send, p.recv, p.count, p.dtype, p.redop, c, s);
    case PG_OP_BROADCAST: return ncclBroadcast(send, p.recv, p.count, p.dtype, op.root, c, s);
    case PG_OP_REDUCE: return ncclReduce(send, p.recv, p.count, p.dtype, p.redop, op.root, c, s);
    case PG_OP_ALLGATHER: return ncclAllGather(send, p.recv, p.count, p.dtype, c, s);
    case PG_OP_REDUCE_SCATTER:
      return ncclReduceScatter(send, p.recv, p.count, p.dtype, p.redop, c, s);
    case PG_OP_GATHER: return ncclGather(send, p.recv, p.count, p.dtype, op.root, c, s);
    case PG_OP_SCATTER: return ncclScatter(send, p.recv, p.count, p.dtype, op.root, c, s);
    case PG_OP_ALLTOALL: return ncclAlltoAll(send, p.recv, p.count, p.dtype, c, s);
    default: return ncclInvalidUsage;
  }
}

const char* nccl_call_name(int32_t op) {
  constexpr const char* kCalls[] = {"ncclAllReduce", "ncclBroadcast",     "ncclReduce",
                                    "ncclAllGather", "ncclReduceScatter", "ncclGather",
                                    "ncclScatter",   "ncclAlltoAll"};  // by pg_op_t
  return op >= 0 && op <= PG_OP_ALLTOALL ? kCalls[op] : "ncclAllReduce (barrier)";
}

}  // namespace

Status Group::create(const pg_backend_group_config_t& config, const pg_host_services_t* host,
                     std::unique_ptr<Group>* out) {
  std::shared_ptr<Comm> comm;
  PG_KIT_TRY(create_communicator(config, host, &comm));
  out->reset(new Group(std::move(comm), host));
  return {};
}

Status Group::split(int32_t color, int32_t /*key*/, const pg_backend_group_config_t* config,
                    std::unique_ptr<Group>* out) {
  // The kit passes a split's config unchecked: it is checked here, on every rank alike.
  if (color == PG_SPLIT_NO_COLOR) {
    if (config != nullptr) return nccl_error(PG_ERR_INVALID_ARGUMENT, "group_split: a config for PG_SPLIT_NO_COLOR");
  } else {
    if (color < 0) {
      return nccl_error(PG_ERR_INVALID_ARGUMENT,
                        "group_split: color " + std::to_string(color) + " is negative");
    }
    PG_KIT_TRY(kit::check_config(config, "nccl: group_split"));
  }
  const pg_host_services_t* host = config != nullptr ? kit::host_of(config) : host_;
  std::shared_ptr<Comm> comm;
  PG_KIT_TRY(split_communicator(*comm_, color, config, host, &comm));
  if (comm != nullptr) out->reset(new Group(std::move(comm), host != nullptr ? host : host_));
  return {};
}

Group::~Group() {
  if (!destroyed_) (void)shutdown();
}

Status Group::shutdown() {
  destroyed_ = true;
  return comm_->shutdown();
}

void Group::abort() { comm_->fail(nccl_error(PG_ERR_ABORTED, "group_abort was called")); }

Status Group::submit(const pg_backend_op_t& op, std::shared_ptr<Work>* out) {
  PG_KIT_TRY(check_buffer_kinds(op));  // before the communicator is touched
  Plan plan;
  PG_KIT_TRY(make_plan(op, comm_->rank(), comm_->size(), comm_->device(), &plan));
  const std::string label = op_label(op);
  if (auto f = comm_->failure()) {
    return nccl_error(
        PG_ERR_ABORTED, label + ": the communicator failed earlier: " + without_prefix(f->message));
  }
  DeviceGuard on(comm_->device());
  PG_KIT_TRY(on.status());
  PG_KIT_TRY(check_pointers(op, plan, comm_->device()));
  const int64_t timeout_ms = op.timeout_ms > 0 ? op.timeout_ms : comm_->timeout_ms();
  auto work = std::make_shared<Work>(comm_, label, timeout_ms);
  if (op.op == PG_OP_SEND || op.op == PG_OP_RECV) {
    PG_KIT_TRY(work->prepare_on_internal_stream(plan));
    const bool send = op.op == PG_OP_SEND;
    work->p2p = P2p{send, send ? op.input.data : op.output.data, plan.count, plan.dtype, op.peer};
    comm_->defer_p2p(work);
  } else {
    PG_KIT_TRY(work->prepare(plan));
    comm_->flush_p2p();  // sends and recvs issued before this go first
    PG_KIT_TRY(issue(op, plan, work));
  }
  *out = std::move(work);
  return {};
}

Status Group::issue(const pg_backend_op_t& op, const Plan& plan,
                    const std::shared_ptr<Work>& issued) {
  Work& work = *issued;
  const Clock::time_point deadline = work.deadline();
  const std::string what = work.label() + ": " + nccl_call_name(op.op);
  void* scratch = nullptr;
  Status st = comm_->enqueue([&](ncclComm_t c, cudaStream_t internal) -> Status {
    const cudaStream_t s = work.stream(internal);
    for (const cudaEvent_t* e = work.starts_begin(); e != work.starts_end(); ++e)
      PG_KIT_TRY(
          cuda_status(cudaStreamWaitEvent(s, *e, 0), work.label() + ": cudaStreamWaitEvent"));
    if (plan.copy_instead) {
      // An average at one rank is the input (see choose_avg).
      if (plan.recv != plan.send)
        PG_KIT_TRY(cuda_status(
            cudaMemcpyAsync(plan.recv, plan.send, plan.bytes(), cudaMemcpyDeviceToDevice, s),
            work.label() + ": cudaMemcpyAsync (average at one rank)"));
    } else {
      const void* send = plan.send;
      if (plan.scratch_bytes > 0) {
        // Stream-ordered, so it costs no synchronisation.
        PG_KIT_TRY(cuda_status(cudaMallocAsync(&scratch, plan.scratch_bytes, s),
                                work.label() + ": cudaMallocAsync (in-place alltoall copy)"));
        PG_KIT_TRY(cuda_status(
            cudaMemcpyAsync(scratch, plan.send, plan.scratch_bytes, cudaMemcpyDeviceToDevice, s),
            work.label() + ": cudaMemcpyAsync (in-place alltoall copy)"));
        send = scratch;
      }
      // The barrier is a one-element allreduce on the group's own device scratch.
      const ncclResult_t r = op.op == PG_OP_BARRIER
                                 ? ncclAllReduce(comm_->barrier_scratch(), comm_->barrier_scratch(),
                                                 1, ncclInt32, ncclSum, c, s)
                                 : call_nccl(op, plan, send, c, s);
      PG_KIT_TRY(comm_->settle(r, what, deadline));
      if (scratch != nullptr) {
        PG_KIT_TRY(cuda_status(cudaFreeAsync(scratch, s), work.label() + ": cudaFreeAsync"));
        scratch = nullptr;
      }
    }
    PG_KIT_TRY(cuda_status(cudaEventRecord(work.done(), s), work.label() + ": cudaEventRecord"));
    work.set_issued(true);
    return {};
  }, issued);
  if (scratch != nullptr) (void)cudaFreeAsync(scratch, work.stream(comm_->stream()));
  return st;
}

}  // namespace procgroup::nccl_backend
