// alltoall by pairwise exchange (size-1 steps, one partner pair per step) and a
// dissemination barrier (ceil(log2(size)) rounds of one-byte messages).
#include <cstring>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/collective_util.h"

namespace procgroup::detail {
namespace {

constexpr char kAlltoall[] = "alltoall (pairwise exchange)";
constexpr char kBarrier[] = "barrier (dissemination)";

}  // namespace

Status fallback_alltoall(Transport& t, const CollectiveArgs& a) {
  PG_ASSIGN_OR_RETURN(const size_t bytes, check_args(t, a, "alltoall", kCheckNone));
  const int size = t.size();
  const int rank = t.rank();
  const size_t total = bytes * static_cast<size_t>(size);
  PG_RETURN_IF_ERROR(require_buffer(a.output, total, "alltoall", "output"));
  const void* input = a.input != nullptr ? a.input : a.output;
  const bool in_place = input == a.output;
  if (!in_place) PG_RETURN_IF_ERROR(check_no_overlap(input, total, a.output, total, "alltoall"));
  if (bytes == 0) return ok_status();

  uint8_t* out = byte_ptr(a.output);
  const uint8_t* in = byte_ptr(input);
  auto block = [bytes](auto* base, int i) { return base + static_cast<size_t>(i) * bytes; };
  if (!in_place) std::memcpy(block(out, rank), block(in, rank), bytes);

  // With a power-of-two size the partner is rank ^ step: each step swaps a pair of blocks
  // between two ranks, so in place needs only one block of scratch. Otherwise rank sends
  // to rank+step and receives from rank-step; in place, a block could then be overwritten
  // before it is sent, so the input is copied first.
  const bool xor_pairs = (size & (size - 1)) == 0;
  std::vector<uint8_t> scratch;
  if (in_place && !xor_pairs) {
    scratch.assign(in, in + total);
    in = scratch.data();
  } else if (in_place) {
    scratch.resize(bytes);
  }
  for (int step = 1; step < size; ++step) {
    const int send_to = xor_pairs ? (rank ^ step) : mod(rank + step, size);
    const int recv_from = xor_pairs ? (rank ^ step) : mod(rank - step, size);
    const bool via_scratch = in_place && xor_pairs;
    IoBatch io(t);
    io.recv(recv_from, via_scratch ? scratch.data() : block(out, recv_from), bytes,
            step_tag(a.tag_base, static_cast<uint64_t>(step)));
    io.send(send_to, block(in, send_to), bytes, step_tag(a.tag_base, static_cast<uint64_t>(step)));
    PG_RETURN_IF_ERROR(io.wait(kAlltoall, static_cast<uint64_t>(step)));
    // The send of this very block has completed, so it can be replaced now.
    if (via_scratch) std::memcpy(block(out, recv_from), scratch.data(), bytes);
  }
  return ok_status();
}

Status fallback_barrier(Transport& t, const CollectiveArgs& a) {
  const int size = t.size();
  const int rank = t.rank();
  if (size < 1 || rank < 0 || rank >= size) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "barrier: bad transport (rank {} of {})", rank,
                      size);
  }
  // After round k every rank has heard, directly or through others, from the 2^(k+1)-1
  // ranks before it; after ceil(log2(size)) rounds from all of them.
  uint64_t round = 0;
  for (int distance = 1; distance < size; distance *= 2, ++round) {
    const uint8_t token_out = 1;
    uint8_t token_in = 0;
    IoBatch io(t);
    io.recv(mod(rank - distance, size), &token_in, 1, step_tag(a.tag_base, round));
    io.send(mod(rank + distance, size), &token_out, 1, step_tag(a.tag_base, round));
    PG_RETURN_IF_ERROR(io.wait(kBarrier, round));
  }
  return ok_status();
}

}  // namespace procgroup::detail
