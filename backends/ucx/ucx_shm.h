// ucx_shm.h — shared-memory windows between the ranks of a one-host group, so that a
// collective reads its peers' data in place instead of passing it through UCX's FIFOs
// (ucx_shm_allreduce.cc).
//
//   ShmWindows w;
//   st = w.open(context, store, rank, size, half_bytes, endpoint_of, timeout, &why_not);
//   if (w.ready()) { ... w.mine(chunk) ... w.peer(j, chunk) ... }   // collective above
//   w.close(context);                                                // group_destroy
//
// Every rank allocates one window through UCX (ucp_mem_map with UCP_MEM_MAP_ALLOCATE: a
// System V or POSIX shared-memory segment), publishes its address and packed rkey in the
// group's store, and maps every peer's with ucp_rkey_ptr. A second store round agrees: the
// windows are used only if every rank mapped every peer's, so all ranks choose the same
// algorithms. A window has two halves; consecutive chunks (counted across collectives)
// alternate between them, so a rank may fill one half while its peers still read the other.
// After the halves, two slots for small messages: a rank posts its data in one with the
// collective's sequence number, written last, and reads its peers' once their number is
// there (alternating slots: a peer can be one collective ahead, never two). Last, the CPU
// the rank last waited on, so that a waiter yields to a peer that shares its CPU.
// One collective at a time uses the windows: ShmTurn queues the others in submission order.
#ifndef PROCGROUP_BACKENDS_UCX_UCX_SHM_H_
#define PROCGROUP_BACKENDS_UCX_UCX_SHM_H_

#include <ucp/api/ucp.h>

#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "procgroup/backend_kit/store.hpp"
#include "ucx_status.h"

namespace procgroup::ucx_backend {

struct Op;

class ShmWindows {
 public:
  ShmWindows() = default;
  ShmWindows(const ShmWindows&) = delete;
  ShmWindows& operator=(const ShmWindows&) = delete;

  // Collective over the group's store. An error is the store's (a peer never published);
  // a window that cannot be made or mapped only leaves ready() false, on every rank.
  Status open(ucp_context_h context, const kit::Store& store, int rank, int size, size_t half_bytes,
              const std::function<ucp_ep_h(int)>& endpoint_of, std::chrono::milliseconds timeout,
              std::string* why_not);
  void close(ucp_context_h context);
  bool ready() const { return ready_; }
  size_t half_bytes() const { return half_; }

  // The next chunk's number (the same on every rank: collectives run in the same order).
  uint64_t next_chunk() { return chunks_++; }
  std::byte* mine(uint64_t chunk) const { return half(base_[rank_], chunk); }
  const std::byte* peer(int rank, uint64_t chunk) const { return half(base_[rank], chunk); }

  // Small messages (up to kSlotBytes): sequence numbers start at 1 (windows start zeroed).
  static constexpr size_t kSlotBytes = 16 << 10;
  // Up to kInlineBytes of data share the header's cache line: a reader that sees the
  // sequence number has the data too, one transfer between cores instead of two.
  static constexpr size_t kInlineBytes = 40;
  struct SlotHeader {
    uint64_t seq;  // written last (release), read first (acquire)
    uint64_t count;
    uint16_t fingerprint;
    alignas(8) std::byte inline_data[kInlineBytes];
  };
  uint64_t next_seq() { return ++seqs_; }
  SlotHeader* header(int rank, uint64_t seq) const {
    return reinterpret_cast<SlotHeader*>(base_[rank] + slots_at_ + (seq % 2) * kSlotStride);
  }
  // Where a slot holds `bytes` of data (the same on every rank once the counts agree).
  std::byte* data(int rank, uint64_t seq, size_t bytes) const {
    SlotHeader* h = header(rank, seq);
    return bytes <= kInlineBytes ? h->inline_data : reinterpret_cast<std::byte*>(h) + kHeaderBytes;
  }
  void publish(uint64_t seq) const;
  bool all_posted(uint64_t seq) const { return first_missing(seq) < 0; }
  int first_missing(uint64_t seq) const;   // the first peer whose slot lacks seq, or -1
  bool await_briefly(uint64_t seq) const;  // all_posted, looking a few dozen times
  // Whether a peer was last seen on the CPU this thread runs on (each rank notes its own
  // CPU here as it looks): spinning on such a peer only keeps it from running.
  bool peer_on_my_cpu() const;

  // The op waiting for its peers' slots (one at a time: the turn), resumed by the poller.
  struct Arrival {
    Op* op = nullptr;
    std::coroutine_handle<> handle;
    uint64_t seq = 0;
  };
  Arrival arrival;

  // The windows' turn (ShmTurn and ShmHold in ucx_shm_allreduce.cc): taken at once, or
  // queued; given back, it passes to the op returned (to be resumed), else the windows are
  // free. Nothing after close() (an abandoned op's coroutine frame may end during shutdown).
  using Waiter = std::pair<Op*, std::coroutine_handle<>>;
  bool try_take() { return !std::exchange(busy_, true); }
  void queue(Op* op, std::coroutine_handle<> h) { waiting_.emplace_back(op, h); }
  std::optional<Waiter> give_back();

 private:
  static constexpr const char* kLayout = "2";  // changes with the window's layout
  static constexpr size_t kHeaderBytes = 64;   // a cache line: larger data starts on the next
  static_assert(sizeof(SlotHeader) <= kHeaderBytes);
  static constexpr size_t kSlotStride = kHeaderBytes + kSlotBytes;
  std::byte* half(std::byte* base, uint64_t chunk) const { return base + (chunk % 2) * half_; }
  size_t cpu_line() const { return slots_at_ + 2 * kSlotStride; }  // the window's last line
  int32_t* cpu_of(int rank) const {                                // CPU + 1 (0: not known yet)
    return reinterpret_cast<int32_t*>(base_[rank] + cpu_line());
  }

  bool ready_ = false;
  bool closed_ = false;
  int rank_ = 0;
  size_t half_ = 0;
  size_t slots_at_ = 0;  // after the halves, on a cache line
  ucp_mem_h memh_ = nullptr;
  std::vector<std::byte*> base_;  // every rank's window, mapped here
  std::vector<ucp_rkey_h> rkeys_;
  uint64_t chunks_ = 0;
  uint64_t seqs_ = 0;
  bool busy_ = false;
  std::deque<Waiter> waiting_;
};

}  // namespace procgroup::ucx_backend

#endif  // PROCGROUP_BACKENDS_UCX_UCX_SHM_H_
