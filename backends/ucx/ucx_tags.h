// ucx_tags.h — how the ucx backend lays out its 64-bit UCP tags.
//
// UCP matches receives on the tag alone (one worker per group, any endpoint), so the tag
// carries the sender's rank as well as what the message is:
//
//   63..62  kind      0 send/recv, 1 collective, 2 control (abort notices, goodbyes)
//   61..40  source    the sending rank (groups are limited to 2^22 ranks)
//   39..0   payload   send/recv: the user's tag folded to 40 bits (below)
//                     collective: collective number mod 2^20 (high), step mod 2^20 (low)
//
// Receives match all 64 bits, except the control receive, which takes any source.
// Wrapping numbers is harmless: between one pair of ranks, messages with equal tags are
// matched in posting order, and every algorithm posts them in the same order on both sides.
#ifndef PROCGROUP_BACKENDS_UCX_UCX_TAGS_H_
#define PROCGROUP_BACKENDS_UCX_UCX_TAGS_H_

#include <cstdint>

namespace procgroup::ucx_backend::tags {

inline constexpr int kMaxRanks = 1 << 22;
inline constexpr uint64_t kKindP2p = 0;
inline constexpr uint64_t kKindCollective = 1;
inline constexpr uint64_t kKindControl = 2;
inline constexpr uint64_t kKindMask = uint64_t{3} << 62;
inline constexpr uint64_t kFullMask = ~uint64_t{0};

inline constexpr uint64_t make(uint64_t kind, int source, uint64_t payload) {
  return kind << 62 | (static_cast<uint64_t>(source) & (kMaxRanks - 1)) << 40 |
         (payload & ((uint64_t{1} << 40) - 1));
}

inline constexpr int source_of(uint64_t tag) {
  return static_cast<int>((tag >> 40) & (kMaxRanks - 1));
}

// A 64-bit send/recv tag in 40 bits: tags below 2^39 map to themselves, and the core's
// reserved tags (>= 2^62, its collectives' seq * 2^16 + step) to the upper half with their
// low 39 bits kept, folded with the bits above so distinct sequence numbers stay distinct.
inline constexpr uint64_t fold_p2p(uint64_t tag) {
  constexpr uint64_t kLow = (uint64_t{1} << 39) - 1;
  const uint64_t reserved = tag >> 62 != 0 ? uint64_t{1} << 39 : 0;
  const uint64_t body = tag & ((uint64_t{1} << 62) - 1);
  return reserved | ((body ^ (body >> 39)) & kLow);
}

inline constexpr uint64_t p2p(int source, uint64_t user_tag) {
  return make(kKindP2p, source, fold_p2p(user_tag));
}

inline constexpr uint64_t collective(int source, uint64_t number, uint64_t step) {
  constexpr uint64_t kMask20 = (uint64_t{1} << 20) - 1;
  return make(kKindCollective, source, (number & kMask20) << 20 | (step & kMask20));
}

inline constexpr uint64_t control(int source) { return make(kKindControl, source, 0); }

}  // namespace procgroup::ucx_backend::tags

#endif  // PROCGROUP_BACKENDS_UCX_UCX_TAGS_H_
