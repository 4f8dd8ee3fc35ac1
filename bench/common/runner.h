// runner.h — the benchmark loop shared by collbench and mpi_collbench. A tool supplies a
// Communicator (barrier and small reductions, for timing and counting wrong elements) and an
// Engine that runs one collective; the runner sweeps the sizes, times, checks and reports.
//
//   MyComm comm;  MyEngine engine;
//   return run_benchmark(info, comm, engine, /*direct=*/nullptr);   // the exit status
//   return run_benchmark(info, comm, engine, direct, &device_memory); // device buffers
//
// Per size, and for out-of-place then in-place: fill the inputs, run -w warmup iterations,
// barrier, time -n iterations, aggregate the per-rank mean over ranks (-a); then with -c 1
// refill the inputs, poison the outputs, run once more in the mode timed (-z) and count
// wrong elements on every rank (summed over ranks). As nccl-tests does, except that
// nccl-tests warms up only at the first and last size and averages over ranks by default.
// With --reference, each row also gets this machine's memory bandwidth at its size: memcpy
// and an f32 reduce-into (dst[i] += src[i], host_math's kernel) of size bytes on the host,
// every rank at once, timed and aggregated like the operations.
#pragma once

#include <cstddef>
#include <cstdint>

#include "bench_types.h"
#include "layout.h"
#include "memory.h"
#include "report.h"

namespace procgroup::bench {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void barrier() = 0;
  // op is kSum, kMin or kMax; every rank gets the result.
  virtual double allreduce(double value, RedOp op) = 0;
  virtual int64_t sum(int64_t value) = 0;
  // Copies bytes from root to every rank (e.g. a rendezvous path).
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
};

// One operation as the runner asks for it. input holds layout.send_count elements and
// output layout.recv_count; in place they point into the same buffer (layout.h).
struct OpCall {
  Coll op;
  Dtype dtype;
  RedOp redop;
  int root;
  Layout layout;
  void* input;
  void* output;
  bool in_place;
};

class Engine {
 public:
  virtual ~Engine() = default;
  // Runs call iters times and returns when all of them completed. blocking: each completes
  // before the next is issued; otherwise all are issued, then waited for (where the library
  // allows it). Throws std::exception on any failure.
  // Called once before the warmup of every timed loop: size scratch buffers here, so no
  // timed iteration pays for them.
  virtual void prepare(const OpCall& call) { (void)call; }
  virtual void run(const OpCall& call, int iters, bool blocking) = 0;
  // Where, in elements from the start of the receive buffer, this rank's in-place output
  // lies; nccl-tests' layout unless the library defines in place differently.
  virtual uint64_t in_place_output_offset(const OpCall& call, int rank) const {
    return static_cast<uint64_t>(rank) * call.layout.recv_in_place_offset;
  }
  // What times this engine's loops; null: the host's steady clock around run().
  virtual Timer* timer() { return nullptr; }
};

// Runs the sweep that info.options describes; rank 0 prints. Returns 0, or 1 when an element
// was wrong or a result file could not be written. Throws what the engines throw. memory:
// where the engines' buffers live (null: host memory, filled and checked in place; else
// filled and checked through host copies).
int run_benchmark(const RunInfo& info, Communicator& comm, Engine& engine, Engine* direct,
                  Memory* memory = nullptr);

}  // namespace procgroup::bench
