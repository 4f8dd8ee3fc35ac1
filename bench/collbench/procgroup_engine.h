// procgroup_engine.h — collbench's view of a procgroup group: a Communicator for the runner's
// barriers and small reductions, and the Engine that issues the measured collectives through
// the public C ABI (procgroup.h), as an application would.
//
// With -g cuda the engine's buffers are device buffers (on Placement::stream) and the
// communicator stages its small values through device memory, so it needs nothing but CUDA
// buffers from the backend.
//
//   procgroup::Group group = procgroup::Group::from_env();
//   ProcgroupCommunicator comm(group);
//   ProcgroupEngine engine(group);
//   engine.run(call, 20, /*blocking=*/false);   // 20 issued with work handles, then waited for
#pragma once

#include "memory.h"
#include "procgroup/procgroup.hpp"
#include "runner.h"

namespace procgroup::bench {

// Where the buffers handed to procgroup live.
struct Placement {
  pg_device_type_t type = PG_DEVICE_CPU;
  int32_t index = 0;
  void* stream = nullptr;  // CUDA: the stream procgroup's operations run on
  pg_buffer_t buffer(void* data, uint64_t count, pg_dtype_t dtype) const;
};

class ProcgroupCommunicator : public Communicator {
 public:
  // staging null: host buffers; else the values go through memory's buffers on placement.
  explicit ProcgroupCommunicator(const Group& group, Memory* staging = nullptr,
                                 Placement placement = {});
  ~ProcgroupCommunicator() override;
  ProcgroupCommunicator(const ProcgroupCommunicator&) = delete;
  ProcgroupCommunicator& operator=(const ProcgroupCommunicator&) = delete;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override;
  double allreduce(double value, RedOp op) override;
  int64_t sum(int64_t value) override;
  void broadcast(void* data, size_t bytes, int root) override;

 private:
  // One blocking single-buffer operation on count elements at data (host memory).
  void on_buffer(Group::CFn fn, void* data, uint64_t count, pg_dtype_t dtype, size_t es,
                 const pg_op_options_t& options);

  const Group& group_;
  int rank_;
  int size_;
  Memory* staging_;
  Placement placement_;
  void* scratch_ = nullptr;
  uint64_t scratch_bytes_ = 0;
};

class ProcgroupEngine : public Engine {
 public:
  // timer null: the runner's host clock.
  explicit ProcgroupEngine(const Group& group, Placement placement = {}, Timer* timer = nullptr);
  void run(const OpCall& call, int iters, bool blocking) override;
  Timer* timer() override { return timer_; }

 private:
  void run_sendrecv(const OpCall& call, int iters, bool blocking);

  const Group& group_;
  int rank_;
  int size_;
  Placement placement_;
  Timer* timer_;
};

pg_dtype_t to_pg(Dtype dtype);
pg_reduce_op_t to_pg(RedOp op);

}  // namespace procgroup::bench
