// procgroup_engine.h — collbench's view of a procgroup group: a Communicator for the runner's
// barriers and small reductions, and the Engine that issues the measured collectives through
// the public C ABI (procgroup.h), as an application would.
//
//   procgroup::Group group = procgroup::Group::from_env();
//   ProcgroupCommunicator comm(group);
//   ProcgroupEngine engine(group);
//   engine.run(call, 20, /*blocking=*/false);   // 20 issued with work handles, then waited for
#pragma once

#include "procgroup/procgroup.hpp"
#include "runner.h"

namespace procgroup::bench {

class ProcgroupCommunicator : public Communicator {
 public:
  explicit ProcgroupCommunicator(const Group& group);
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override;
  double allreduce(double value, RedOp op) override;
  int64_t sum(int64_t value) override;
  void broadcast(void* data, size_t bytes, int root) override;

 private:
  const Group& group_;
  int rank_;
  int size_;
};

class ProcgroupEngine : public Engine {
 public:
  explicit ProcgroupEngine(const Group& group);
  void run(const OpCall& call, int iters, bool blocking) override;

 private:
  void run_sendrecv(const OpCall& call, int iters, bool blocking);

  const Group& group_;
  int rank_;
  int size_;
};

pg_dtype_t to_pg(Dtype dtype);
pg_reduce_op_t to_pg(RedOp op);

}  // namespace procgroup::bench
