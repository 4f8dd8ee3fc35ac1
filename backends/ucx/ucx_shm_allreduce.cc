// Allreduce through a one-host group's shared-memory windows and their slots (ucx_shm.h;
// see ucx_algorithms.h).
#include <coroutine>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "ucx_algorithms.h"
#include "ucx_group.h"
#include "ucx_io.h"  // differences()
#include "ucx_op.h"

namespace procgroup::ucx_backend {
namespace {

// Bytes of our block reduced at a time (allreduce_shared): small enough to stay in L1.
constexpr size_t kReducePiece = 16 << 10;

// The windows' turn, held until the algorithm ends, then handed to the next collective
// queued. status: a group that broke before the turn came fails the op (a peer's slots or
// handshakes would never come).
struct ShmHold {
  UcxGroup* group;
  Status status;
  ShmHold(UcxGroup* g, Status s) : group(g), status(std::move(s)) {}
  ShmHold(const ShmHold&) = delete;
  ShmHold& operator=(const ShmHold&) = delete;
  ~ShmHold() {
    if (auto next = group->shm().give_back()) group->resume_later(next->first, next->second);
  }
};

// Waits until no earlier collective of the group uses the windows:
//   const ShmHold hold = co_await ShmTurn{op};
struct ShmTurn {
  Op& op;
  bool await_ready() { return op.group->shm().try_take(); }
  void await_suspend(std::coroutine_handle<> h) { op.group->shm().queue(&op, h); }
  ShmHold await_resume() const {
    if (!op.group->broken()) return {op.group, Status{}};
    return {op.group,
            Status::error(PG_ERR_ABORTED, "the group failed before its turn for the windows")};
  }
};

// "recv of 4000 bytes from rank 1: rank 1 sent 6000 bytes (...)": the message Io gives a
// receive of another size, for a peer whose count came in a handshake or slot header.
Status count_mismatch(const Op& op, int peer, uint64_t their_count) {
  std::string text = "recv of ";
  text += std::to_string(op.plan.bytes());
  text += " bytes from rank ";
  text += std::to_string(peer);
  text += ": rank ";
  text += std::to_string(peer);
  text += " sent ";
  text += std::to_string(their_count * op.es());
  text += " bytes (the ranks passed different counts)";
  return Status::error(PG_ERR_MISMATCH, text);
}

// Waits until every peer posted its slot for `seq`; fails if the group broke meanwhile.
struct ShmArrival {
  Op& op;
  uint64_t seq;
  bool await_ready() const { return op.group->shm().all_posted(seq); }
  void await_suspend(std::coroutine_handle<> h) { op.group->shm().arrival = {&op, h, seq}; }
  Status await_resume() const {
    if (op.group->shm().all_posted(seq)) return {};
    return Status::error(PG_ERR_ABORTED, "stopped waiting for the peers' shared-memory slots");
  }
};

// A peer's slot from a call with other arguments.
Status check_slots(const Op& op, const ShmWindows& windows, uint64_t seq) {
  for (int j = 0; j < op.size; ++j) {
    const ShmWindows::SlotHeader* h = windows.header(j, seq);
    if (j == op.rank || (h->count == op.plan.n && h->fingerprint == op.fingerprint)) continue;
    const std::string args = differences(h->fingerprint, op.fingerprint);
    if (args.empty()) return count_mismatch(op, j, h->count);
    std::string text = "rank " + std::to_string(j);
    text += " called this operation with other arguments (";
    text += args;
    text += ")";
    return Status::error(PG_ERR_MISMATCH, text);
  }
  return {};
}

// A handshake through the slots: every rank posts the next sequence number with its count
// and fingerprint (no data), and waits until every peer has; a peer that passed other
// arguments fails it. A flag in shared memory, not a UCX message: a message a rank sends
// just before a long copy or reduction often reached its peer tens of microseconds late.
Task handshake(Op& op, ShmWindows& windows) {
  const uint64_t seq = windows.next_seq();
  ShmWindows::SlotHeader* mine = windows.header(op.rank, seq);
  mine->count = op.plan.n;
  mine->fingerprint = op.fingerprint;
  windows.publish(seq);
  ShmArrival arrival{op, seq};
  PG_KIT_CO_TRY(co_await arrival);
  co_return check_slots(op, windows, seq);
}

}  // namespace

// Per chunk: every rank copies its contribution to the others' blocks into its window;
// after a handshake, rank r reduces block r from its input and every peer's window into
// its output, and puts the result into its window; after a second handshake every rank
// copies the others' results. Each block is reduced once: all ranks get the same bits.
// The handshakes use the slots (one collective at a time holds the windows' turn).
Task allreduce_shared(Op& op) {
  ShmWindows& windows = op.group->shm();
  ShmTurn turn{op};
  const ShmHold hold = co_await turn;  // passes the turn on however this ends
  PG_KIT_CO_TRY(hold.status);
  const int p = op.size, r = op.rank;
  const size_t es = op.es();
  const uint64_t per_chunk = std::max<uint64_t>(1, windows.half_bytes() / es);
  for (uint64_t first = 0; first < op.plan.n; first += per_chunk) {
    const Blocks blocks{std::min(per_chunk, op.plan.n - first), p};
    const std::byte* in = (op.plan.in_place ? op.plan.out : op.plan.in) + first * es;
    std::byte* out = op.plan.out + first * es;
    const uint64_t chunk = windows.next_chunk();
    std::byte* mine = windows.mine(chunk);
    auto at = [&](int b) { return blocks.off(b) * es; };
    for (int b = 0; b < p; ++b) {
      if (b != r) std::memcpy(mine + at(b), in + at(b), blocks.len(b) * es);
    }
    PG_KIT_CO_TRY(co_await handshake(op, windows));  // every window is filled
    // Ours first, then the peers' in rank order (in place, out aliases our input block);
    // piece by piece, so AVG's division and the copy into our window read from L1.
    const uint64_t n = blocks.len(r), piece = std::max<uint64_t>(1, kReducePiece / es);
    for (uint64_t done = 0; done < n; done += piece) {
      const uint64_t len = std::min(piece, n - done);
      const size_t at_r = at(r) + done * es;
      const std::byte* acc = in + at_r;
      for (int j = 0; j < p; ++j) {
        if (j == r) continue;
        PG_KIT_CO_TRY(op.combine(out + at_r, acc, windows.peer(j, chunk) + at_r, len));
        acc = out + at_r;
      }
      PG_KIT_CO_TRY(op.finish_avg(out + at_r, len));
      std::memcpy(mine + at_r, out + at_r, len * es);
    }
    PG_KIT_CO_TRY(co_await handshake(op, windows));  // every block is reduced
    for (int b = 0; b < p; ++b) {
      if (b != r) std::memcpy(out + at(b), windows.peer(b, chunk) + at(b), blocks.len(b) * es);
    }
  }
  co_return Status{};
}

// Small messages: every rank posts its data in its slot, then reduces every rank's slot
// in rank order itself (the same bits everywhere), in one round of shared-memory signals.
Task allreduce_shared_small(Op& op) {
  ShmWindows& windows = op.group->shm();
  ShmTurn turn{op};
  const ShmHold hold = co_await turn;  // passes the turn on however this ends
  PG_KIT_CO_TRY(hold.status);
  const uint64_t seq = windows.next_seq();
  ShmWindows::SlotHeader* mine = windows.header(op.rank, seq);
  const std::byte* in = op.plan.in_place ? op.plan.out : op.plan.in;  // the plan says where
  const size_t bytes = op.plan.bytes();
  std::memcpy(windows.data(op.rank, seq, bytes), in, bytes);
  mine->count = op.plan.n;
  mine->fingerprint = op.fingerprint;
  windows.publish(seq);
  ShmArrival arrival{op, seq};
  PG_KIT_CO_TRY(co_await arrival);
  PG_KIT_CO_TRY(check_slots(op, windows, seq));
  std::byte* out = op.plan.out;
  for (int j = 1; j < op.size; ++j) {
    const std::byte* acc = j == 1 ? windows.data(0, seq, bytes) : out;
    PG_KIT_CO_TRY(op.combine(out, acc, windows.data(j, seq, bytes), op.plan.n));
  }
  co_return op.finish_avg(out, op.plan.n);
}

}  // namespace procgroup::ucx_backend
