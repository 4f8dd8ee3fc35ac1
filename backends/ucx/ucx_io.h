// ucx_io.h — a set of UCX tag sends and receives that a coroutine waits for together.
//
//   Io io(op);
//   io.send(peer, data, bytes, step);     // collective tag: (sender, op.number, step, args)
//   io.recv(peer, buffer, bytes, step);   // must receive exactly `bytes`, of the same args
//   Status st = co_await io;              // suspends until all completed; first error
//
// Requests carry a RequestSlot in the space UCX reserves for the backend in each request
// (create_context's request_size): the slot links the request to its Io and Op, so a
// completion callback needs no allocation and no lookup. Callbacks only account and queue
// the waiting coroutine; the group resumes it after ucp_worker_progress returns.
// Posting errors (an unknown or lost peer) are reported by the next co_await. A receive
// whose sender passed other arguments (ucx_tags.h: its fingerprint or dtype differs) or
// another size fails with PG_ERR_MISMATCH saying what differs.
#ifndef PROCGROUP_BACKENDS_UCX_UCX_IO_H_
#define PROCGROUP_BACKENDS_UCX_UCX_IO_H_

#include <ucp/api/ucp.h>

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <string>

#include "ucx_op.h"
#include "ucx_recv_reduce.h"
#include "ucx_status.h"

namespace procgroup::ucx_backend {

class Io;

// "dtype i32 where this rank passed f32": what differs between two OpFingerprints, but for
// root and count ("" when only they do).
std::string differences(uint16_t theirs, uint16_t mine);

// Which bits of the sender's tag a receive checks itself (ucx_tags.h).
enum class Check : uint8_t {
  kNone,        // sends
  kCollective,  // the sender's OpFingerprint
  kConfirm,     // a root's receive of a confirmation: any step, zero bytes
  kP2p,         // the sender's dtype
};

struct RequestSlot {
  Io* io;  // null once its Io was destroyed early (the op still counts the request)
  Op* op;  // null until post() attached the request (UCX zeroes the area at allocation
           // through init_slot; finish() clears it again before releasing)
  RequestSlot* prev;
  RequestSlot* next;
  uint64_t expected;  // receives: the exact size required (sends: UINT64_MAX)
  uint64_t tag;       // receives: the tag posted, with this rank's own arguments in it
  int32_t peer;
  bool is_recv;
  Check check;
};

class Io {
 public:
  explicit Io(Op& op) : op_(op) {}
  // Requests still outstanding are detached (and receives cancelled); the op keeps
  // counting them, so it cannot finish before UCX is done with its buffers.
  ~Io();
  Io(const Io&) = delete;
  Io& operator=(const Io&) = delete;

  // Collective messages, tagged with the op's collective number and `step`.
  void send(int peer, const void* data, size_t bytes, uint64_t step);
  void recv(int peer, void* data, size_t bytes, uint64_t step);
  // A collective receive of into->bytes that reduces into into->dst as UCX unpacks it
  // (ucx_recv_reduce.h); *into must stay put until the receive completed.
  void recv_reduce(int peer, ReduceInto* into, uint64_t step);
  // Point-to-point messages with a ready-made UCP tag (tags::p2p); recv, too, must get
  // exactly `bytes` of its own dtype.
  void send_tagged(int peer, const void* data, size_t bytes, uint64_t tag);
  void recv_tagged(int peer, void* data, size_t bytes, uint64_t tag);
  // A zero-byte message of this collective that says "my part matched" (ucx_rooted.cc);
  // the receive takes any step, so a peer that sent data here instead is a mismatch.
  void send_confirm(int peer);
  void recv_confirm(int peer);

  // Peers of the outstanding receives (then sends), for "waiting for rank 3" messages.
  int first_waited_peer() const;
  // Calls f(peer, is_recv) for every outstanding request (for diagnostics).
  template <class F>
  void for_each_pending(F&& f) const {
    for (const RequestSlot* s = head_; s != nullptr; s = s->next) f(s->peer, s->is_recv);
  }
  Io* prev = nullptr;  // the op's list of Ios with requests outstanding (Op::ios)
  Io* next = nullptr;
  // Cancels every outstanding receive (the group is breaking).
  void cancel_receives(ucp_worker_h worker);

  bool await_ready() const noexcept { return head_ == nullptr; }
  void await_suspend(std::coroutine_handle<> waiter) noexcept { waiter_ = waiter; }
  // The first error since the last co_await (then cleared).
  Status await_resume();

  // UCX's request initialisation and completion callbacks.
  static void init_slot(void* request);
  static void on_send(void* request, ucs_status_t status, void* user_data);
  static void on_recv(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                      void* user_data);

 private:
  void post(bool is_recv, int peer, void* data, size_t bytes, uint64_t tag, Check check,
            ucp_datatype_t datatype = ucp_dt_make_contig(1));
  void attach(RequestSlot* slot);
  void detach(RequestSlot* slot);
  void fail(pg_status_t code, std::string message);
  static void finish(void* request, ucs_status_t status, uint64_t length, uint64_t sender_tag,
                     void* user_data);

  Op& op_;
  // A request UCX completed (and called back) inside ucp_tag_*_nbx, before post() could
  // attach it: post() treats it as completed at once.
  struct Early {
    void* request = nullptr;
    ucs_status_t status = UCS_OK;
    uint64_t length = 0;
    uint64_t sender_tag = 0;
  } early_;
  Status error_;
  std::coroutine_handle<> waiter_;
  RequestSlot* head_ = nullptr;  // the outstanding requests (none: co_await goes on at once)
};

}  // namespace procgroup::ucx_backend

#endif  // PROCGROUP_BACKENDS_UCX_UCX_IO_H_
