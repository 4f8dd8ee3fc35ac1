// Collectives built from Transport send/recv: what the core runs when a backend lacks
// an operation, a dtype or a reduce op. Algorithm by size: recursive doubling for small
// allreduce, ring reduce-scatter + allgather for large; binomial trees for broadcast and
// reduce; ring allgather; pairwise exchange for alltoall. Any world size (odd included).
//
// Buffers follow the user ABI (procgroup.h): n = count is elements per rank; input may
// equal output (in place), and for allgather/gather input may be output + rank*n, for
// reduce_scatter/scatter output may be input + rank*n. Non-roots' absent buffers are null.
// Each call uses tags in [tag_base, tag_base + kTagsPerCollective).
#pragma once

#include <cstdint>

#include "collectives/transport.h"
#include "common/status.h"
#include "procgroup/procgroup.h"

namespace procgroup::detail {

inline constexpr uint64_t kTagsPerCollective = uint64_t{1} << 16;

struct CollectiveArgs {
  const void* input = nullptr;
  void* output = nullptr;
  uint64_t count = 0;  // n, elements per rank (see above)
  pg_dtype_t dtype = PG_DTYPE_INVALID;
  pg_reduce_op_t reduce_op = PG_REDUCE_SUM;  // AVG handled here: sum, then scale
  int root = 0;
  uint64_t tag_base = 0;
};

Status fallback_allreduce(Transport& t, const CollectiveArgs& a);
Status fallback_broadcast(Transport& t, const CollectiveArgs& a);
Status fallback_reduce(Transport& t, const CollectiveArgs& a);
Status fallback_allgather(Transport& t, const CollectiveArgs& a);
Status fallback_reduce_scatter(Transport& t, const CollectiveArgs& a);
Status fallback_gather(Transport& t, const CollectiveArgs& a);
Status fallback_scatter(Transport& t, const CollectiveArgs& a);
Status fallback_alltoall(Transport& t, const CollectiveArgs& a);
Status fallback_barrier(Transport& t, const CollectiveArgs& a);

// The algorithm for each operation, indexed by pg_op_t; NULL where the core cannot emulate
// (send, recv). Must match the op table's `emulated` (checked in dispatch.cc).
using FallbackAlgorithm = Status (*)(Transport&, const CollectiveArgs&);
inline constexpr FallbackAlgorithm kFallbacks[PG_OP_COUNT_] = {
    fallback_allreduce, fallback_broadcast, fallback_reduce,   fallback_allgather,
    fallback_reduce_scatter, fallback_gather, fallback_scatter, fallback_alltoall,
    fallback_barrier,
    nullptr,  // send
    nullptr,  // recv
};

}  // namespace procgroup::detail
