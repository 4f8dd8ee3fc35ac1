// ucx_tags.h — how the ucx backend lays out its 64-bit UCP tags.
//
// UCP matches receives on the tag alone (one worker per group, any endpoint), so the tag
// carries the sender's rank as well as what the message is:
//
//   63..62  kind      0 send/recv, 1 collective, 2 control (abort notices, goodbyes)
//   61..40  source    the sending rank (groups are limited to 2^22 ranks)
//   39..0   payload   send/recv:  [39..36 dtype][35..0 the user's tag folded to 36 bits]
//                     collective: [39..26 collective number mod 2^14][25..16 step mod 2^10]
//                                 [15..0 the sender's OpFingerprint (op_fingerprint.h)]
//
// Receives match every bit except the sender's arguments (dtype, fingerprint), which the
// receiver compares itself when the message arrived: ranks that called different things
// fail with PG_ERR_MISMATCH instead of exchanging data. A root's confirmation receive
// (confirmed_by_receivers in ucx_rooted.cc) ignores the step as well; the control receive
// takes any source. Wrapping numbers is harmless: between one pair of ranks, messages with
// equal tags are matched in posting order, and every algorithm posts them in the same order
// on both sides.
#ifndef PROCGROUP_BACKENDS_UCX_UCX_TAGS_H_
#define PROCGROUP_BACKENDS_UCX_UCX_TAGS_H_

#include <cstdint>

namespace procgroup::ucx_backend::tags {

inline constexpr int kMaxRanks = 1 << 22;
inline constexpr uint64_t kKindP2p = 0;
inline constexpr uint64_t kKindCollective = 1;
inline constexpr uint64_t kKindControl = 2;
inline constexpr uint64_t kKindMask = uint64_t{3} << 62;
inline constexpr uint64_t kFingerprintBits = 0xFFFF;           // collective: the sender's arguments
inline constexpr uint64_t kStepBits = uint64_t{0x3FF} << 16;   // collective: the step
inline constexpr uint64_t kP2pDtypeBits = uint64_t{15} << 36;  // send/recv: the sender's dtype
// What receives match on (the rest they check themselves, see above).
inline constexpr uint64_t kCollectiveMatch = ~kFingerprintBits;
inline constexpr uint64_t kConfirmMatch = ~(kFingerprintBits | kStepBits);
inline constexpr uint64_t kP2pMatch = ~kP2pDtypeBits;

inline constexpr uint64_t make(uint64_t kind, int source, uint64_t payload) {
  return kind << 62 | (static_cast<uint64_t>(source) & (kMaxRanks - 1)) << 40 |
         (payload & ((uint64_t{1} << 40) - 1));
}

// A 64-bit send/recv tag in 36 bits: tags below 2^35 map to themselves (procgroup.h allows
// users 2^30), and the core's reserved tags (>= 2^62, its collectives' seq * 2^16 + step)
// to the upper half with their low 35 bits kept, folded with the bits above so distinct
// sequence numbers stay distinct.
inline constexpr uint64_t fold_p2p(uint64_t tag) {
  constexpr uint64_t kLow = (uint64_t{1} << 35) - 1;
  const uint64_t reserved = tag >> 62 != 0 ? uint64_t{1} << 35 : 0;
  const uint64_t body = tag & ((uint64_t{1} << 62) - 1);
  return reserved | ((body ^ (body >> 35)) & kLow);
}

inline constexpr uint64_t p2p(int source, uint64_t user_tag, int dtype) {
  return make(kKindP2p, source, (static_cast<uint64_t>(dtype) & 15) << 36 | fold_p2p(user_tag));
}
inline constexpr int p2p_dtype(uint64_t tag) { return static_cast<int>((tag >> 36) & 15); }

inline constexpr uint64_t collective(int source, uint64_t number, uint64_t step,
                                     uint16_t fingerprint) {
  constexpr uint64_t kMask14 = (uint64_t{1} << 14) - 1;
  return make(kKindCollective, source,
              (number & kMask14) << 26 | (step << 16 & kStepBits) | fingerprint);
}
inline constexpr uint16_t fingerprint_of(uint64_t tag) {
  return static_cast<uint16_t>(tag & kFingerprintBits);
}

inline constexpr uint64_t control(int source) { return make(kKindControl, source, 0); }

}  // namespace procgroup::ucx_backend::tags

#endif  // PROCGROUP_BACKENDS_UCX_UCX_TAGS_H_
