// Binomial trees rooted anywhere: ranks are renumbered relative to the root (vrank), so
// vrank v's parent is v with its lowest set bit cleared. Broadcast pushes down the tree in
// ceil(log2(size)) rounds; reduce pulls up it in the mirror order.
#include <cstring>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/collective_util.h"
#include "collectives/reduce.h"
#include "common/dtype.h"

namespace procgroup::detail {
namespace {

constexpr char kBroadcast[] = "broadcast (binomial tree)";
constexpr char kReduce[] = "reduce (binomial tree)";

int real_rank(int vrank, int root, int size) { return (vrank + root) % size; }

}  // namespace

Status fallback_broadcast(Transport& t, const CollectiveArgs& a) {
  PG_ASSIGN_OR_RETURN(const size_t bytes, check_args(t, a, "broadcast", kCheckRoot));
  const int size = t.size();
  const int rank = t.rank();
  const bool is_root = rank == a.root;
  // The root sends from its input (its output when in place); the others receive into and
  // forward from their output.
  const void* source = a.output;
  if (is_root) {
    source = a.input != nullptr ? a.input : a.output;
    PG_RETURN_IF_ERROR(require_buffer(source, bytes, "broadcast", "the root's buffer"));
    if (a.output != nullptr && source != a.output) {
      PG_RETURN_IF_ERROR(check_no_overlap(source, bytes, a.output, bytes, "broadcast"));
    }
  } else {
    PG_RETURN_IF_ERROR(require_buffer(a.output, bytes, "broadcast", "output"));
  }
  if (bytes == 0) return ok_status();
  if (is_root && a.output != nullptr && source != a.output) {
    std::memcpy(a.output, source, bytes);
  }

  const int vrank = mod(rank - a.root, size);
  int mask = 1;
  while (mask < size) {
    if ((vrank & mask) != 0) {
      IoBatch io(t);
      io.recv(real_rank(vrank - mask, a.root, size), a.output, bytes, step_tag(a.tag_base, 0));
      PG_RETURN_IF_ERROR(io.wait(kBroadcast, 0));
      break;
    }
    mask <<= 1;
  }
  // Children are vrank + m for every m below the bit we received on (all bits for the
  // root); send to all of them at once, farthest subtree first.
  IoBatch io(t);
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (vrank + mask < size) {
      io.send(real_rank(vrank + mask, a.root, size), source, bytes, step_tag(a.tag_base, 0));
    }
  }
  return io.wait(kBroadcast, 1);
}

Status fallback_reduce(Transport& t, const CollectiveArgs& a) {
  PG_ASSIGN_OR_RETURN(const size_t bytes, check_args(t, a, "reduce", kCheckReduceOp | kCheckRoot));
  const int size = t.size();
  const int rank = t.rank();
  const bool is_root = rank == a.root;
  const void* input = a.input != nullptr ? a.input : a.output;
  PG_RETURN_IF_ERROR(require_buffer(input, bytes, "reduce", "input"));
  if (is_root) {
    PG_RETURN_IF_ERROR(require_buffer(a.output, bytes, "reduce", "the root's output"));
    if (input != a.output) {
      PG_RETURN_IF_ERROR(check_no_overlap(input, bytes, a.output, bytes, "reduce"));
    }
  }
  if (bytes == 0) return ok_status();

  // The accumulator: the root's output; on other ranks a scratch copy made only when a
  // child's data arrives, so leaves send the caller's input untouched and non-roots never
  // write to the caller's buffers.
  void* acc = nullptr;
  std::vector<uint8_t> acc_scratch;
  if (is_root) {
    if (input != a.output) std::memcpy(a.output, input, bytes);
    acc = a.output;
  }
  std::vector<uint8_t> incoming;
  const int vrank = mod(rank - a.root, size);
  uint64_t step = 0;
  for (int mask = 1; mask < size; mask <<= 1, ++step) {
    if ((vrank & mask) != 0) {
      IoBatch io(t);
      io.send(real_rank(vrank - mask, a.root, size), acc != nullptr ? acc : input, bytes,
              step_tag(a.tag_base, step));
      return io.wait(kReduce, step);
    }
    const int child = vrank + mask;
    if (child >= size) continue;
    if (acc == nullptr) {
      acc_scratch.assign(byte_ptr(input), byte_ptr(input) + bytes);
      acc = acc_scratch.data();
    }
    incoming.resize(bytes);
    IoBatch io(t);
    io.recv(real_rank(child, a.root, size), incoming.data(), bytes, step_tag(a.tag_base, step));
    PG_RETURN_IF_ERROR(io.wait(kReduce, step));
    // acc covers vranks [v, v+mask), the child [v+mask, v+2*mask): lower op higher, a
    // fixed order for a given root.
    PG_RETURN_IF_ERROR(reduce_into(acc, incoming.data(), a.count, a.dtype, a.reduce_op));
  }
  // Only the root (vrank 0) gets here.
  if (a.reduce_op == PG_REDUCE_AVG) {
    PG_RETURN_IF_ERROR(scale_down(a.output, a.count, a.dtype, static_cast<uint64_t>(size)));
  }
  return ok_status();
}

}  // namespace procgroup::detail
