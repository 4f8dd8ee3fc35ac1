// gloo_p2p.h — send/recv with an always-on size check, so that a send and a recv of
// different sizes is an error (PG_ERR_MISMATCH) instead of a process abort.
//
// Gloo's TCP transport asserts, in its event-loop thread, that an incoming message fits
// the receive posted for it: a larger send aborts the receiving process, and a smaller
// one is delivered short without a word. So every send starts with a 16-byte header
// (dtype, byte count) on the tag's header slot:
//   - payloads up to kInlineBytes (64 KiB) travel in the same message (one small copy per side);
//   - larger ones go on the tag's payload slot, where the receiver posts its receive only
//     once the header matched. On a mismatch it drains the payload into scratch instead,
//     so both ranks stay in step, and fails with PG_ERR_MISMATCH naming both sizes.
// A header receive always has room for the largest inline message, so no message can
// exceed the receive it lands in.
//
//   auto t = std::make_unique<P2pTransfer>(*context, op, plan, order);  // worker, issue order
//   Status st = t->finish(deadline, order);                              // a waiter; may throw
#ifndef PROCGROUP_BACKENDS_GLOO_GLOO_P2P_H_
#define PROCGROUP_BACKENDS_GLOO_GLOO_P2P_H_

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "gloo_plan.h"

namespace procgroup::gloo_backend {

inline constexpr size_t kInlineBytes = 64 * 1024;

// Where a tag's headers and large payloads travel: disjoint from each other, from Gloo's
// collective slots (top byte 0x01..0x08) and from the reserved slots near 2^64.
inline uint64_t header_slot(uint64_t tag) { return tag ^ (uint64_t{1} << 63); }
inline uint64_t payload_slot(uint64_t tag) {
  return tag >= (uint64_t{1} << 62) ? tag : tag | (uint64_t{1} << 61);
}

// Payload receives from one (peer, tag) must be posted in the order their headers came,
// which is the order the receives were issued: tickets handed out at issue, served in turn.
class RecvOrder {
 public:
  uint64_t take_ticket(int peer, uint64_t tag);
  // Blocks until it is ticket's turn; false if aborted or the deadline passed first.
  bool wait_turn(int peer, uint64_t tag, uint64_t ticket, Clock::time_point deadline);
  // The current turn is over (its payload receive, if any, is posted).
  void next_turn(int peer, uint64_t tag);
  // Wakes every waiter for good (the group broke).
  void abort();

 private:
  struct Queue {
    uint64_t issued = 0;
    uint64_t serving = 0;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<int, uint64_t>, Queue> queues_;
  bool aborted_ = false;
};

class P2pTransfer {
 public:
  // Posts a send (header, and the payload when large) or the header receive of a recv.
  // Throws Gloo's exceptions.
  P2pTransfer(gloo::Context& context, const pg_backend_op_t& op, const Plan& plan,
              RecvOrder& order);
  // Waits for the transfer until deadline: PG_OK, PG_ERR_MISMATCH (recv), PG_ERR_ABORTED
  // (the wait was aborted), PG_ERR_TIMEOUT (only for a turn never given); Gloo's own
  // failures and timeouts are thrown.
  Status finish(Clock::time_point deadline, RecvOrder& order);

 private:
  Status finish_recv(Clock::time_point deadline, RecvOrder& order);

  gloo::Context& context_;
  const pg_backend_op_t op_;
  const Plan plan_;
  uint64_t ticket_ = 0;
  std::vector<std::byte> frame_;  // send: header + inline payload; recv: room for the largest
  std::unique_ptr<gloo::transport::UnboundBuffer> frame_buf_;
  std::unique_ptr<std::byte[]> drain_;  // a mismatched large payload lands here
  std::unique_ptr<gloo::transport::UnboundBuffer> payload_buf_;
};

}  // namespace procgroup::gloo_backend

#endif  // PROCGROUP_BACKENDS_GLOO_GLOO_P2P_H_
