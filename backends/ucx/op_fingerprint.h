// op_fingerprint.h — what every rank must pass alike to one operation, in 16 bits that ride
// along with each message, so a receiver can tell that its sender called something else.
//
//   const uint16_t mine = OpFingerprint::collective(op, dtype, count, root, reduce_op).bits;
//   // sender: put mine in the message's tag; receiver: compare with the tag that arrived
//   if (theirs != mine) OpFingerprint::Fields diff = OpFingerprint{theirs}.fields();
//
// Layout: [15..12 op][11..8 dtype][7..5 reduce op, 7 when the op does not reduce]
// [4..0 root and count]. Op, dtype and reduce op are exact, so those differences are always
// seen and can be named; the last 5 bits are the root's low bits xor a hash of the count
// per rank, so roots that differ in their low 5 bits are always seen, other roots and
// counts with probability 31/32 (a different count also changes the message sizes, which
// receivers check on their own). Which ops have a root or reduce comes from the kit's op
// table; nothing else of ucx is used, so any backend can carry it.
#ifndef PROCGROUP_BACKENDS_UCX_OP_FINGERPRINT_H_
#define PROCGROUP_BACKENDS_UCX_OP_FINGERPRINT_H_

#include <cstdint>

#include "procgroup/backend_kit/op_table.hpp"

namespace procgroup::ucx_backend {

struct OpFingerprint {
  static constexpr int kNone = 7;  // reduce-op field of an op that does not reduce
  uint16_t bits = 0;

  struct Fields {
    int op, dtype, reduce_op, root_and_count;
  };

  // A collective; count is per rank (per block), root and reduce_op count only where the
  // op uses them (other ranks may pass anything there).
  static constexpr OpFingerprint collective(pg_op_t op, pg_dtype_t dtype, uint64_t count, int root,
                                            pg_reduce_op_t reduce_op) {
    const uint64_t count_hash = (count * 0x9E3779B97F4A7C15ull) >> 59;
    const kit::OpInfo& info = kit::op_info(op);
    const uint64_t root_bits = info.rooted ? static_cast<uint64_t>(root) : 0;
    const uint64_t reduce = info.reducing ? static_cast<uint64_t>(reduce_op) & 7 : kNone;
    return OpFingerprint{static_cast<uint16_t>((static_cast<uint64_t>(op) & 15) << 12 |
                                               (static_cast<uint64_t>(dtype) & 15) << 8 |
                                               reduce << 5 | ((root_bits ^ count_hash) & 31))};
  }

  constexpr Fields fields() const {
    return Fields{bits >> 12, (bits >> 8) & 15, (bits >> 5) & 7, bits & 31};
  }
};

}  // namespace procgroup::ucx_backend

#endif  // PROCGROUP_BACKENDS_UCX_OP_FINGERPRINT_H_
