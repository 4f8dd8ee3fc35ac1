// allreduce: recursive doubling for small messages, ring reduce-scatter + ring allgather
// for large ones. Both give every rank the same bits: recursive doubling always combines
// lower-rank data op higher-rank data (so both partners compute the identical expression),
// and the ring computes each block once and then only copies it.
#include <cstring>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/collective_util.h"
#include "collectives/reduce.h"
#include "common/dtype.h"

namespace procgroup::detail {
namespace {

constexpr char kRecursiveDoubling[] = "allreduce (recursive doubling)";
constexpr char kRingReduceScatter[] = "allreduce (ring reduce-scatter)";
constexpr char kRingAllgather[] = "allreduce (ring allgather)";

// data = lower op higher, where `data` belongs to the higher or the lower side.
Status combine_ordered(void* data, void* incoming, uint64_t count, size_t bytes, pg_dtype_t dtype,
                       pg_reduce_op_t op, bool incoming_is_lower) {
  if (!incoming_is_lower) return reduce_into(data, incoming, count, dtype, op);
  PG_RETURN_IF_ERROR(reduce_into(incoming, data, count, dtype, op));
  if (bytes != 0) std::memcpy(data, incoming, bytes);
  return ok_status();
}

// In place on `data` (count elements). With p the largest power of two <= size and
// rem = size - p, the first 2*rem ranks pair up (even into odd) so that p ranks run the
// doubling; the even ones get the result back at the end.
Status recursive_doubling(Transport& t, void* data, uint64_t count, size_t bytes, pg_dtype_t dtype,
                          pg_reduce_op_t op, uint64_t tag_base) {
  const int rank = t.rank();
  const int size = t.size();
  int pof2 = 1;
  int log2_pof2 = 0;
  while (pof2 <= size / 2) {
    pof2 *= 2;
    ++log2_pof2;
  }
  const int rem = size - pof2;
  std::vector<uint8_t> incoming(bytes);
  // Tags: 0 fold-in, 1 .. log2(p) doubling, log2(p)+1 fold-out.
  const uint64_t fold_out_step = static_cast<uint64_t>(log2_pof2) + 1;

  int vrank = rank - rem;  // rank among the p participants; -1 for a folded-in even rank
  if (rank < 2 * rem) {
    IoBatch io(t);
    if (rank % 2 == 0) {
      io.send(rank + 1, data, bytes, step_tag(tag_base, 0));
      vrank = -1;
    } else {
      io.recv(rank - 1, incoming.data(), bytes, step_tag(tag_base, 0));
      vrank = rank / 2;
    }
    PG_RETURN_IF_ERROR(io.wait(kRecursiveDoubling, 0));
    if (vrank >= 0) {
      PG_RETURN_IF_ERROR(
          combine_ordered(data, incoming.data(), count, bytes, dtype, op, /*lower=*/true));
    }
  }
  if (vrank >= 0) {
    uint64_t step = 1;
    for (int mask = 1; mask < pof2; mask <<= 1, ++step) {
      const int vpeer = vrank ^ mask;
      const int peer = vpeer < rem ? vpeer * 2 + 1 : vpeer + rem;
      IoBatch io(t);
      io.recv(peer, incoming.data(), bytes, step_tag(tag_base, step));
      io.send(peer, data, bytes, step_tag(tag_base, step));
      PG_RETURN_IF_ERROR(io.wait(kRecursiveDoubling, step));
      PG_RETURN_IF_ERROR(
          combine_ordered(data, incoming.data(), count, bytes, dtype, op, vpeer < vrank));
    }
  }
  if (rank < 2 * rem) {
    IoBatch io(t);
    if (rank % 2 == 0) {
      io.recv(rank + 1, data, bytes, step_tag(tag_base, fold_out_step));
    } else {
      io.send(rank - 1, data, bytes, step_tag(tag_base, fold_out_step));
    }
    PG_RETURN_IF_ERROR(io.wait(kRecursiveDoubling, fold_out_step));
  }
  return ok_status();
}

}  // namespace

Status fallback_allreduce(Transport& t, const CollectiveArgs& a) {
  PG_ASSIGN_OR_RETURN(const size_t bytes, check_args(t, a, "allreduce", kCheckReduceOp));
  PG_RETURN_IF_ERROR(require_buffer(a.output, bytes, "allreduce", "output"));
  const void* input = a.input != nullptr ? a.input : a.output;
  if (input != a.output) {
    PG_RETURN_IF_ERROR(check_no_overlap(input, bytes, a.output, bytes, "allreduce"));
  }
  if (a.count == 0) return ok_status();
  const int size = t.size();

  if (bytes <= kAllreduceSmallBytes || size == 1) {
    if (input != a.output) std::memcpy(a.output, input, bytes);
    PG_RETURN_IF_ERROR(
        recursive_doubling(t, a.output, a.count, bytes, a.dtype, a.reduce_op, a.tag_base));
    // Once, at the end, on identical bits: every rank gets the same result.
    if (a.reduce_op == PG_REDUCE_AVG) {
      PG_RETURN_IF_ERROR(scale_down(a.output, a.count, a.dtype, static_cast<uint64_t>(size)));
    }
    return ok_status();
  }

  const size_t elem = dtype_size(a.dtype);
  const Partition blocks{a.count, size};
  uint8_t* own = byte_ptr(a.output) + blocks.offset(t.rank()) * elem;
  PG_RETURN_IF_ERROR(ring_reduce_scatter(t, input, blocks, own, a.dtype, a.reduce_op, a.tag_base, 0,
                                         kRingReduceScatter));
  if (a.reduce_op == PG_REDUCE_AVG) {
    // Scaled by its owner before distribution, so all ranks receive the same bits.
    PG_RETURN_IF_ERROR(
        scale_down(own, blocks.count(t.rank()), a.dtype, static_cast<uint64_t>(size)));
  }
  return ring_allgather(t, a.output, blocks, elem, a.tag_base, static_cast<uint64_t>(size) - 1,
                        kRingAllgather);
}

}  // namespace procgroup::detail
