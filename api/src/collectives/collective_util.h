// Shared pieces of the fallback collectives: argument checks, block partitioning, tag
// numbering, a batch of sends/receives that is always fully waited for, and the ring
// reduce-scatter / allgather phases that allreduce, reduce_scatter and allgather share.
//
//   IoBatch io(t);
//   io.recv(left, tmp, bytes, step_tag(a.tag_base, step));
//   io.send(right, block, bytes, step_tag(a.tag_base, step));
//   PG_RETURN_IF_ERROR(io.wait("allgather (ring)", step));
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/transport.h"
#include "common/status.h"
#include "procgroup/procgroup.h"

namespace procgroup::detail {

// allreduce moves from recursive doubling (log2(size) full-message exchanges, latency
// bound) to the ring (2(size-1) exchanges of 1/size of the message, bandwidth bound) above
// this many bytes of data per rank.
inline constexpr size_t kAllreduceSmallBytes = size_t{64} * 1024;

// The tag of an algorithm's step. Wrapping is harmless: messages between one pair of ranks
// with one tag are matched in posting order, and every algorithm here posts them in the
// same order on both sides.
inline uint64_t step_tag(uint64_t tag_base, uint64_t step) {
  return tag_base + step % kTagsPerCollective;
}

// `total` elements split into `parts` contiguous blocks whose sizes differ by at most one,
// the larger ones first (block i: total / parts, plus one while i < total % parts).
struct Partition {
  uint64_t total = 0;
  int parts = 1;

  uint64_t count(int i) const {
    const uint64_t p = static_cast<uint64_t>(parts);
    return total / p + (static_cast<uint64_t>(i) < total % p ? 1 : 0);
  }
  uint64_t offset(int i) const {
    const uint64_t p = static_cast<uint64_t>(parts);
    const uint64_t u = static_cast<uint64_t>(i);
    return u * (total / p) + (u < total % p ? u : total % p);
  }
  uint64_t max_count() const { return count(0); }
};

// (a % n + n) % n for the ring and tree index arithmetic.
inline int mod(int a, int n) { return ((a % n) + n) % n; }

inline uint8_t* byte_ptr(void* p) { return static_cast<uint8_t*>(p); }
inline const uint8_t* byte_ptr(const void* p) { return static_cast<const uint8_t*>(p); }

// Posts sends and receives, then waits for all of them. A failure to post stops further
// posting but still waits for what was posted, so no buffer is in use when wait() returns.
// Zero-byte transfers are skipped: both sides compute the same sizes, so they skip alike.
class IoBatch {
 public:
  explicit IoBatch(Transport& t) : t_(t) {}
  IoBatch(const IoBatch&) = delete;
  IoBatch& operator=(const IoBatch&) = delete;
  ~IoBatch();

  void send(int peer, const void* data, size_t bytes, uint64_t tag);
  void recv(int peer, void* data, size_t bytes, uint64_t tag);
  // The first failure, prefixed with "<algorithm> step <step>, <sending to|receiving from>
  // rank <peer>".
  Status wait(const char* algorithm, uint64_t step);

 private:
  struct Entry {
    Request request;
    int peer;
    bool is_send;
  };
  void add(Result<Request> posted, int peer, bool is_send);

  Transport& t_;
  std::vector<Entry> entries_;
  Status post_failure_;
  int failed_peer_ = -1;
  bool failed_is_send_ = false;
};

// What a collective needs checked before it communicates.
enum CheckFlags : unsigned { kCheckNone = 0, kCheckReduceOp = 1, kCheckRoot = 2 };

// Checks the group, dtype, (reduce op, root) and that size * count elements fit in size_t;
// returns the bytes of one rank's block (count * dtype size).
Result<size_t> check_args(const Transport& t, const CollectiveArgs& a, const char* op,
                          unsigned flags);

// PG_ERR_INVALID_ARGUMENT naming `what` when p is null and there is data to move.
Status require_buffer(const void* p, size_t bytes, const char* op, const char* what);

// PG_ERR_INVALID_ARGUMENT when [a, a+a_bytes) and [b, b+b_bytes) overlap; the in-place
// forms are recognised by the callers before this is asked.
Status check_no_overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes,
                        const char* op);

// Ring reduce-scatter over the blocks of `input` given by `blocks` (one per rank): rank r
// ends with the fully reduced block r in out_block (which may alias block r of input;
// input is otherwise never written). Each block's result is computed once, on its owner,
// as a left fold in ring order, so it does not depend on who later receives it.
// Uses tags step_tag(tag_base, first_step + 0 .. size-2).
Status ring_reduce_scatter(Transport& t, const void* input, const Partition& blocks,
                           void* out_block, pg_dtype_t dtype, pg_reduce_op_t op, uint64_t tag_base,
                           uint64_t first_step, const char* algorithm);

// Ring allgather in place: buffer holds every rank's block as given by `blocks`, rank r's
// already filled; on return all are. Uses tags step_tag(tag_base, first_step + 0 .. size-2).
Status ring_allgather(Transport& t, void* buffer, const Partition& blocks, size_t elem_size,
                      uint64_t tag_base, uint64_t first_step, const char* algorithm);

}  // namespace procgroup::detail
