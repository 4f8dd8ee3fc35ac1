// ucx_algorithms.h — the ucx backend's collective algorithms and how one is chosen.
//
// Every algorithm is a coroutine over tag send/recv (ucx_io.h). make_task() picks one by
// operation, message size and world size, with the thresholds in Tuning (make_data_task in
// ucx_ops.cc; the same choices as a table: README.md, Operations).
//
// Reductions fuse the copy (out = in op received), AVG divides once per element (the rank
// that finishes a block divides it before it is distributed), f16/bf16 accumulate in float.
// PROCGROUP_UCX_{ALLREDUCE,BROADCAST,REDUCE,ALLGATHER} force an algorithm (tests do).
#ifndef PROCGROUP_BACKENDS_UCX_UCX_ALGORITHMS_H_
#define PROCGROUP_BACKENDS_UCX_UCX_ALGORITHMS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ucx_task.h"

namespace procgroup::ucx_backend {

struct Op;

// Collectives' blocks (ucx_allreduce.cc, ucx_shm_allreduce.cc): count elements split over `parts`
// blocks, the first count % parts one element longer.
struct Blocks {
  uint64_t count;
  int parts;
  uint64_t off(int b) const {
    const uint64_t base = count / parts, extra = count % parts;
    return b * base + std::min<uint64_t>(b, extra);
  }
  uint64_t len(int b) const { return count / parts + (static_cast<uint64_t>(b) < count % parts); }
};

struct Tuning {
  enum class Allreduce { kAuto, kRecursiveDoubling, kRabenseifner, kRing, kShared, kSharedSmall };
  enum class Tree { kAuto, kBinomial, kChain };
  enum class Allgather { kAuto, kBruck, kRing };
  Allreduce allreduce = Allreduce::kAuto;
  Tree broadcast = Tree::kAuto;
  Tree reduce = Tree::kAuto;
  Allgather allgather = Allgather::kAuto;
  size_t rd_max = 16 << 10;
  size_t ring_min = 1 << 20;
  size_t tree_max = 64 << 10;
  size_t bruck_max = 64 << 10;
  size_t chunk_bytes = 1 << 20;
  // One-host groups: allreduces from shm_min bytes go through shared-memory windows
  // (ucx_shm.h) in chunks of shm_chunk bytes, smaller ones through its slots; shm_chunk 0
  // makes no windows.
  size_t shm_min = 16 << 10;
  size_t shm_chunk = 2 << 20;
  int window = 4;          // chunks in flight per pipeline
  bool fused_recv = true;  // pipelines reduce while receiving (ucx_recv_reduce.h)
  int64_t spin_us = 100;   // a waiter spins this long without events before blocking
  // Groups up to this size connect every endpoint at creation (and wait until all peers
  // did); larger ones connect to a peer when first talking to it.
  int connect_all_max = 64;
  // Defaults, overridden by PROCGROUP_UCX_* variables (README.md).
  static Tuning from_env();
};

Task make_task(Op& op);

// ucx_allreduce.cc
Task allreduce_recursive_doubling(Op& op);
Task allreduce_rabenseifner(Op& op);
Task allreduce_ring(Op& op);
Task reduce_scatter_ring(Op& op);
Task allgather_ring(Op& op);

// ucx_rooted.cc
Task broadcast_binomial(Op& op);
Task reduce_binomial(Op& op);
Task chain(Op& op);  // broadcast or reduce
Task gather_scatter_linear(Op& op);
// Runs a broadcast or scatter (inner), then every other rank confirms to the root with a
// zero-byte message, which the root awaits: its data only leaves it, so without this the
// root would return PG_OK while a rank that passed another count, dtype or root failed.
// A rank that wrongly thinks it is the root sends its data where the root expects a
// confirmation: both fail with PG_ERR_MISMATCH. Costs the root one message latency.
Task confirmed_by_receivers(Op& op, Task inner);

// ucx_shm_allreduce.cc: through the group's ShmWindows (ready() only); small: their slots
// (up to ShmWindows::kSlotBytes)
Task allreduce_shared(Op& op);
Task allreduce_shared_small(Op& op);

// ucx_exchange.cc
Task allgather_bruck(Op& op);
Task alltoall_pairwise(Op& op);
Task barrier_dissemination(Op& op);
Task p2p_message(Op& op);  // send or recv

// A scratch buffer, free or on loan from the group's pool.
struct ScratchLease {
  std::byte* data = nullptr;
  size_t capacity = 0;
};

// Scratch buffers reused across operations (allocations of fresh pages would fault on
// every large collective). Not thread-safe: the group's mutex guards it.
class ScratchPool {
 public:
  ScratchPool() = default;
  ~ScratchPool();
  ScratchPool(const ScratchPool&) = delete;
  ScratchPool& operator=(const ScratchPool&) = delete;
  // At least `bytes` (64-byte aligned) of capacity; data nullptr: no memory.
  ScratchLease take(size_t bytes);
  void give(ScratchLease lease);

 private:
  std::vector<ScratchLease> free_;
  size_t cached_bytes_ = 0;
};

}  // namespace procgroup::ucx_backend

#endif  // PROCGROUP_BACKENDS_UCX_UCX_ALGORITHMS_H_
