// mpi_engine.h — mpi_collbench's Communicator and Engine over MPI_COMM_WORLD: the same
// collectives as collbench, through MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block,
// MPI_Bcast, MPI_Reduce, MPI_Alltoall, MPI_Gather, MPI_Scatter and MPI_Sendrecv.
//
// MPI lacks f16, bf16 and avg: the 16-bit types travel as 2-byte contiguous types with
// user-defined reduce ops (through float, rounding to nearest even), and avg is a sum
// followed by a local division, as procgroup's core emulates it.
//
// -z 1 calls the blocking functions, one after another. -z 0 issues the nonblocking ones
// (MPI_Iallreduce, MPI_Iallgather, ..., MPI_Isend and MPI_Irecv for sendrecv) for all
// iterations, then MPI_Waitall, as collbench -z 0 issues all its works before waiting. The
// outstanding operations of a timed loop share one output buffer, which MPI calls
// erroneous (their order of writing is not defined; every one writes the same values out of
// place): the timing is still of the same work, and the checked run is a single operation.
//
//   MpiSession session(&argc, &argv);    // MPI_Init ... MPI_Finalize
//   MpiCommunicator comm;
//   MpiEngine engine;
//   engine.run(call, 20, true);
#pragma once

#include <mpi.h>

#include <array>
#include <string>
#include <vector>

#include "runner.h"

namespace procgroup::bench {

// MPI_Init on construction, MPI_Finalize on destruction; errors are returned, not fatal.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  // "Open MPI v4.1.4" (the first part of MPI_Get_library_version).
  static std::string library_version();
};

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator();
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override;
  double allreduce(double value, RedOp op) override;
  int64_t sum(int64_t value) override;
  void broadcast(void* data, size_t bytes, int root) override;

 private:
  int rank_ = 0;
  int size_ = 1;
};

class MpiEngine : public Engine {
 public:
  MpiEngine();
  ~MpiEngine() override;
  MpiEngine(const MpiEngine&) = delete;
  MpiEngine& operator=(const MpiEngine&) = delete;

  void run(const OpCall& call, int iters, bool blocking) override;
  // MPI_Reduce_scatter_block in place leaves this rank's block at the start of the buffer.
  uint64_t in_place_output_offset(const OpCall& call, int rank) const override;

 private:
  // Issues one operation: the blocking call when requests is null, else the nonblocking
  // one, its request(s) appended.
  void start(const OpCall& call, MPI_Datatype type, MPI_Op op, int count,
             std::vector<MPI_Request>* requests);
  // What follows a completed operation (avg's division).
  void finish(const OpCall& call) const;
  MPI_Datatype type_of(Dtype dtype) const;
  MPI_Op op_of(Dtype dtype, RedOp op) const;

  int rank_ = 0;
  int size_ = 1;
  MPI_Datatype half_ = MPI_DATATYPE_NULL;  // f16 and bf16: 2 opaque bytes
  MPI_Datatype bf16_ = MPI_DATATYPE_NULL;
  std::array<MPI_Op, 4> half_ops_{};  // sum, prod, min, max through float
  std::array<MPI_Op, 4> bf16_ops_{};
  std::vector<MPI_Request> requests_;  // -z 0: the outstanding operations of one run()
};

}  // namespace procgroup::bench
