// Block-wise collectives: allgather and reduce_scatter run the ring phases shared with
// allreduce; gather and scatter talk directly between the root and each rank (the root's
// link carries (size-1)*n either way, and direct keeps every other rank's memory at n).
#include <cstring>

#include "collectives/algorithms.h"
#include "collectives/collective_util.h"
#include "collectives/reduce.h"
#include "common/dtype.h"

namespace procgroup::detail {
namespace {

constexpr char kAllgather[] = "allgather (ring)";
constexpr char kReduceScatter[] = "reduce_scatter (ring)";
constexpr char kGather[] = "gather (direct)";
constexpr char kScatter[] = "scatter (direct)";

// For the forms whose in-place address is block `rank` of the size*n buffer `whole`:
// `part` is in place when it is that block, and otherwise must not overlap `whole`.
Status check_block_form(const void* whole, const void* part, size_t bytes, int size, int rank,
                        const char* op) {
  if (whole == nullptr || part == nullptr) return ok_status();
  if (part == byte_ptr(whole) + static_cast<size_t>(rank) * bytes) return ok_status();
  return check_no_overlap(whole, bytes * static_cast<size_t>(size), part, bytes, op);
}

}  // namespace

Status fallback_allgather(Transport& t, const CollectiveArgs& a) {
  PG_ASSIGN_OR_RETURN(const size_t bytes, check_args(t, a, "allgather", kCheckNone));
  const int size = t.size();
  const int rank = t.rank();
  PG_RETURN_IF_ERROR(require_buffer(a.output, bytes, "allgather", "output"));
  uint8_t* own = byte_ptr(a.output) + static_cast<size_t>(rank) * bytes;
  const void* input = a.input != nullptr ? a.input : own;
  PG_RETURN_IF_ERROR(check_block_form(a.output, input, bytes, size, rank, "allgather"));
  if (bytes == 0) return ok_status();
  if (input != own) std::memcpy(own, input, bytes);
  const Partition blocks{a.count * static_cast<uint64_t>(size), size};
  return ring_allgather(t, a.output, blocks, dtype_size(a.dtype), a.tag_base, 0, kAllgather);
}

Status fallback_reduce_scatter(Transport& t, const CollectiveArgs& a) {
  PG_ASSIGN_OR_RETURN(const size_t bytes, check_args(t, a, "reduce_scatter", kCheckReduceOp));
  const int size = t.size();
  const int rank = t.rank();
  PG_RETURN_IF_ERROR(require_buffer(a.output, bytes, "reduce_scatter", "output"));
  // In place the input starts rank blocks before the output (procgroup.h).
  const void* input =
      a.input != nullptr ? a.input : byte_ptr(a.output) - static_cast<size_t>(rank) * bytes;
  PG_RETURN_IF_ERROR(check_block_form(input, a.output, bytes, size, rank, "reduce_scatter"));
  if (bytes == 0) return ok_status();
  const Partition blocks{a.count * static_cast<uint64_t>(size), size};
  PG_RETURN_IF_ERROR(ring_reduce_scatter(t, input, blocks, a.output, a.dtype, a.reduce_op,
                                         a.tag_base, 0, kReduceScatter));
  if (a.reduce_op == PG_REDUCE_AVG) {
    PG_RETURN_IF_ERROR(scale_down(a.output, a.count, a.dtype, static_cast<uint64_t>(size)));
  }
  return ok_status();
}

Status fallback_gather(Transport& t, const CollectiveArgs& a) {
  PG_ASSIGN_OR_RETURN(const size_t bytes, check_args(t, a, "gather", kCheckRoot));
  const int size = t.size();
  const int rank = t.rank();
  const bool is_root = rank == a.root;
  uint8_t* out = byte_ptr(a.output);
  const void* input = a.input != nullptr
                          ? a.input
                          : (out != nullptr ? out + static_cast<size_t>(rank) * bytes : nullptr);
  PG_RETURN_IF_ERROR(require_buffer(input, bytes, "gather", "input"));
  if (is_root) {
    PG_RETURN_IF_ERROR(require_buffer(a.output, bytes, "gather", "the root's output"));
    PG_RETURN_IF_ERROR(check_block_form(a.output, input, bytes, size, rank, "gather"));
  }
  if (bytes == 0) return ok_status();
  IoBatch io(t);
  if (!is_root) {
    io.send(a.root, input, bytes, step_tag(a.tag_base, 0));
    return io.wait(kGather, 0);
  }
  for (int peer = 0; peer < size; ++peer) {
    if (peer != rank)
      io.recv(peer, out + static_cast<size_t>(peer) * bytes, bytes, step_tag(a.tag_base, 0));
  }
  uint8_t* own = out + static_cast<size_t>(rank) * bytes;
  if (input != own) std::memcpy(own, input, bytes);
  return io.wait(kGather, 0);
}

Status fallback_scatter(Transport& t, const CollectiveArgs& a) {
  PG_ASSIGN_OR_RETURN(const size_t bytes, check_args(t, a, "scatter", kCheckRoot));
  const int size = t.size();
  const int rank = t.rank();
  PG_RETURN_IF_ERROR(require_buffer(a.output, bytes, "scatter", "output"));
  IoBatch io(t);
  if (rank != a.root) {
    if (bytes == 0) return ok_status();
    io.recv(a.root, a.output, bytes, step_tag(a.tag_base, 0));
    return io.wait(kScatter, 0);
  }
  const uint8_t* input = a.input != nullptr
                             ? byte_ptr(a.input)
                             : byte_ptr(a.output) - static_cast<size_t>(rank) * bytes;
  PG_RETURN_IF_ERROR(check_block_form(input, a.output, bytes, size, rank, "scatter"));
  if (bytes == 0) return ok_status();
  for (int peer = 0; peer < size; ++peer) {
    if (peer != rank)
      io.send(peer, input + static_cast<size_t>(peer) * bytes, bytes, step_tag(a.tag_base, 0));
  }
  const uint8_t* own = input + static_cast<size_t>(rank) * bytes;
  if (own != a.output) std::memcpy(a.output, own, bytes);
  return io.wait(kScatter, 0);
}

}  // namespace procgroup::detail
