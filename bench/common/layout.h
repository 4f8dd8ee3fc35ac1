// layout.h — how big each buffer of a collective is at one benchmark size, and the bus
// bandwidth factor, both exactly as nccl-tests defines them (doc/PERFORMANCE.md there).
//
// The size S of a row is the largest buffer a rank passes: the output of allgather and
// gather, the input of reduce_scatter and scatter, either buffer of the others. The count
// column is the per-rank count the operation is called with (S / element size, divided by
// the number of ranks for allgather, gather, reduce_scatter, scatter and alltoall), and S is
// rounded down so that it is a whole number of those counts:
//
//   Layout l = layout_for(Coll::kAllgather, 1 << 20, 4, 3);  // count 87381, bytes 1048572
//   double busbw = algbw * busbw_factor(Coll::kAllgather, 3); // algbw = l.bytes / seconds
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "bench_types.h"

namespace procgroup::bench {

struct Layout {
  uint64_t count = 0;       // per-rank count passed to the operation (the "count" column)
  uint64_t send_count = 0;  // elements of this rank's input buffer
  uint64_t recv_count = 0;  // elements of this rank's output buffer
  // In place, the input starts at recv + rank * send_in_place_offset elements and the output
  // at recv + rank * recv_in_place_offset (allgather/gather: input inside the output;
  // reduce_scatter/scatter: output inside the input; the others: the same buffer).
  uint64_t send_in_place_offset = 0;
  uint64_t recv_in_place_offset = 0;
  uint64_t bytes = 0;  // the size column: max(send_count, recv_count) * element size
};

Layout layout_for(Coll op, uint64_t bytes, size_t element_size, int nranks);

// busbw = algbw * factor: allreduce 2(n-1)/n; allgather, reduce_scatter, alltoall, gather,
// scatter (n-1)/n; broadcast, reduce, sendrecv 1.
double busbw_factor(Coll op, int nranks);

// min, min*factor, min*factor^2, ... up to and including max (factor >= 2, min >= 1).
std::vector<uint64_t> sweep_sizes(uint64_t min_bytes, uint64_t max_bytes, uint64_t factor);

}  // namespace procgroup::bench
