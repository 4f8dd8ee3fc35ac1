// collbench's procgroup Communicator and Engine (see procgroup_engine.h).
#include "procgroup_engine.h"

#include <utility>
#include <vector>

namespace procgroup::bench {
namespace {

Group::CFn function_for(Coll op) {
  switch (op) {
    case Coll::kAllreduce: return pg_allreduce;
    case Coll::kAllgather: return pg_allgather;
    case Coll::kReduceScatter: return pg_reduce_scatter;
    case Coll::kBroadcast: return pg_broadcast;
    case Coll::kReduce: return pg_reduce;
    case Coll::kAlltoall: return pg_alltoall;
    case Coll::kGather: return pg_gather;
    case Coll::kScatter: return pg_scatter;
    case Coll::kSendrecv: break;  // two calls: see run_sendrecv
  }
  return nullptr;
}

// Blocking form: a NULL work pointer makes the call wait for its own completion.
void call_blocking(pg_status_t status) { check(status); }

// Newest first: operations of a group complete in issue order, so the caller sleeps once
// instead of being woken for every completion (a training step waits the same way).
void wait_all(std::vector<Work>& works) {
  for (auto it = works.rbegin(); it != works.rend(); ++it) it->wait();
}

}  // namespace

pg_dtype_t to_pg(Dtype dtype) {
  switch (dtype) {
    case Dtype::kF32: return PG_DTYPE_F32;
    case Dtype::kF64: return PG_DTYPE_F64;
    case Dtype::kF16: return PG_DTYPE_F16;
    case Dtype::kBf16: return PG_DTYPE_BF16;
    case Dtype::kI8: return PG_DTYPE_I8;
    case Dtype::kU8: return PG_DTYPE_U8;
    case Dtype::kI32: return PG_DTYPE_I32;
    case Dtype::kI64: return PG_DTYPE_I64;
  }
  return PG_DTYPE_INVALID;
}

pg_reduce_op_t to_pg(RedOp op) {
  switch (op) {
    case RedOp::kSum: return PG_REDUCE_SUM;
    case RedOp::kProd: return PG_REDUCE_PROD;
    case RedOp::kMin: return PG_REDUCE_MIN;
    case RedOp::kMax: return PG_REDUCE_MAX;
    case RedOp::kAvg: return PG_REDUCE_AVG;
  }
  return PG_REDUCE_SUM;
}

pg_buffer_t Placement::buffer(void* data, uint64_t count, pg_dtype_t dtype) const {
  pg_buffer_t b = pg_buffer_cpu(data, count, dtype);
  b.device_type = type;
  b.device_index = index;
  b.stream = stream;
  return b;
}

ProcgroupCommunicator::ProcgroupCommunicator(const Group& group, Memory* staging,
                                             Placement placement)
    : group_(group),
      rank_(group.rank()),
      size_(group.size()),
      staging_(staging),
      placement_(placement) {}

ProcgroupCommunicator::~ProcgroupCommunicator() {
  if (staging_ != nullptr) staging_->release(scratch_);
}

void ProcgroupCommunicator::on_buffer(Group::CFn fn, void* data, uint64_t count, pg_dtype_t dtype,
                                      size_t es, const pg_op_options_t& options) {
  if (staging_ == nullptr) {
    const pg_buffer_t b = pg_buffer_cpu(data, count, dtype);
    return call_blocking(fn(group_.handle(), nullptr, &b, &options, nullptr));
  }
  const uint64_t bytes = count * es;
  if (bytes > scratch_bytes_) {
    staging_->release(std::exchange(scratch_, nullptr));
    scratch_bytes_ = 0;
    scratch_ = staging_->allocate(bytes);
    scratch_bytes_ = bytes;
  }
  staging_->to_device(scratch_, data, bytes);
  const pg_buffer_t b = placement_.buffer(scratch_, count, dtype);
  call_blocking(fn(group_.handle(), nullptr, &b, &options, nullptr));
  staging_->to_host(data, scratch_, bytes);
}

// With staging, a one-element allreduce: the barrier then needs no host buffer either.
void ProcgroupCommunicator::barrier() {
  if (staging_ == nullptr) return check(pg_barrier(group_.handle(), nullptr, nullptr));
  sum(0);
}

double ProcgroupCommunicator::allreduce(double value, RedOp op) {
  on_buffer(pg_allreduce, &value, 1, PG_DTYPE_F64, sizeof value,
            op_options(static_cast<ReduceOp>(to_pg(op))));
  return value;
}

int64_t ProcgroupCommunicator::sum(int64_t value) {
  on_buffer(pg_allreduce, &value, 1, PG_DTYPE_I64, sizeof value, op_options());
  return value;
}

void ProcgroupCommunicator::broadcast(void* data, size_t bytes, int root) {
  on_buffer(pg_broadcast, data, bytes, PG_DTYPE_U8, 1, op_options(ReduceOp::kSum, root));
}

ProcgroupEngine::ProcgroupEngine(const Group& group, Placement placement, Timer* timer)
    : group_(group),
      rank_(group.rank()),
      size_(group.size()),
      placement_(placement),
      timer_(timer) {}

void ProcgroupEngine::run(const OpCall& call, int iters, bool blocking) {
  if (call.op == Coll::kSendrecv) return run_sendrecv(call, iters, blocking);
  const pg_dtype_t dtype = to_pg(call.dtype);
  const pg_buffer_t in = placement_.buffer(call.input, call.layout.send_count, dtype);
  const pg_buffer_t out = placement_.buffer(call.output, call.layout.recv_count, dtype);
  const pg_op_options_t o = op_options(static_cast<ReduceOp>(to_pg(call.redop)), call.root);
  const Group::CFn fn = function_for(call.op);
  if (blocking) {
    for (int i = 0; i < iters; ++i) call_blocking(fn(group_.handle(), &in, &out, &o, nullptr));
    return;
  }
  std::vector<Work> works;  // released (even on failure) when they go out of scope
  works.reserve(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) works.push_back(group_.run(fn, &in, &out, o));
  wait_all(works);
}

// nccl-tests' pattern: send to rank+1, receive from rank-1 (with 2 ranks, a pair exchange).
void ProcgroupEngine::run_sendrecv(const OpCall& call, int iters, bool blocking) {
  const pg_dtype_t dtype = to_pg(call.dtype);
  pg_buffer_t in = placement_.buffer(call.input, call.layout.send_count, dtype);
  pg_buffer_t out = placement_.buffer(call.output, call.layout.recv_count, dtype);
  const pg_op_options_t to = op_options(ReduceOp::kSum, 0, (rank_ + 1) % size_);
  const pg_op_options_t from = op_options(ReduceOp::kSum, 0, (rank_ + size_ - 1) % size_);
  std::vector<Work> works;
  works.reserve(2 * static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    pg_work_t send = nullptr, recv = nullptr;
    check(pg_send(group_.handle(), &in, &to, &send));
    works.emplace_back(send);
    check(pg_recv(group_.handle(), &out, &from, &recv));
    works.emplace_back(recv);
    if (blocking) {
      wait_all(works);
      works.clear();
    }
  }
  wait_all(works);
}

}  // namespace procgroup::bench
