// Tagged sends and receives awaited together (see ucx_io.h).
#include "ucx_io.h"

#include <limits>
#include <string>

#include "ucx_group.h"
#include "ucx_resources.h"
#include "ucx_tags.h"

namespace procgroup::ucx_backend {
namespace {

constexpr uint64_t kAnySize = std::numeric_limits<uint64_t>::max();

std::string describe(bool is_recv, size_t bytes, int peer) {
  return std::string(is_recv ? "recv of " : "send of ") + std::to_string(bytes) + " bytes " +
         (is_recv ? "from" : "to") + " rank " + std::to_string(peer);
}

// How a completed request ended: UCX's status, and for a receive whether the message had
// the size this rank expected (ranks that passed different counts). UCX reports a larger
// message as truncated (it wrote nothing past the buffer) and a smaller one as a short
// length; either is PG_ERR_MISMATCH naming both sizes.
Status outcome(bool is_recv, ucs_status_t status, uint64_t length, uint64_t expected, int peer) {
  const std::string who = "rank " + std::to_string(peer);
  const bool truncated = status == UCS_ERR_MESSAGE_TRUNCATED;
  if (is_recv && (truncated || (status == UCS_OK && expected != kAnySize && length != expected))) {
    const std::string sent = length != kAnySize && length != expected
                                 ? std::to_string(length) + " bytes"
                                 : "more than " + std::to_string(expected) + " bytes";
    return Status::error(PG_ERR_MISMATCH, "recv of " + std::to_string(expected) + " bytes from " +
                                              who + ": " + who + " sent " + sent +
                                              " (the ranks passed different counts)");
  }
  if (status == UCS_OK) return {};
  if (status == UCS_ERR_CANCELED) {
    return Status::error(PG_ERR_ABORTED,
                         (is_recv ? "recv from " : "send to ") + who + ": cancelled");
  }
  return Status::error(status_of(status), (is_recv ? "recv from " : "send to ") + who + ": " +
                                              ucs_status_string(status));
}

}  // namespace

// The op's list of Ios with outstanding requests.
struct IoList {
  static void link(Io* io) {
    Op& op = io->op_;
    io->prev_ = nullptr;
    io->next_ = op.ios;
    if (op.ios != nullptr) op.ios->prev_ = io;
    op.ios = io;
  }
  static void unlink(Io* io) {
    Op& op = io->op_;
    if (io->prev_ != nullptr) io->prev_->next_ = io->next_;
    if (io->next_ != nullptr) io->next_->prev_ = io->prev_;
    if (op.ios == io) op.ios = io->next_;
    io->prev_ = io->next_ = nullptr;
  }
};

Io::~Io() {
  if (pending_ == 0) return;
  // Only an algorithm that returns early (on an error) leaves requests behind; the group
  // is breaking, which completes the sends (endpoints force-closed); receives we cancel.
  ucp_worker_h worker = op_.group->worker();
  for (RequestSlot* s = head_; s != nullptr;) {
    RequestSlot* next = s->next;
    s->io = nullptr;
    s->prev = s->next = nullptr;
    if (s->is_recv && worker != nullptr) ucp_request_cancel(worker, s);
    s = next;
  }
  head_ = nullptr;
  IoList::unlink(this);
}

void Io::send(int peer, const void* data, size_t bytes, uint64_t step) {
  post(false, peer, const_cast<void*>(data), bytes, tags::collective(op_.rank, op_.number, step),
       kAnySize);
}

void Io::recv(int peer, void* data, size_t bytes, uint64_t step) {
  post(true, peer, data, bytes, tags::collective(peer, op_.number, step), bytes);
}

void Io::recv_reduce(int peer, ReduceInto* into, uint64_t step) {
  post(true, peer, into, into->bytes, tags::collective(peer, op_.number, step), into->bytes,
       op_.group->reduce_datatype());
}

void Io::send_tagged(int peer, const void* data, size_t bytes, uint64_t tag) {
  post(false, peer, const_cast<void*>(data), bytes, tag, kAnySize);
}

void Io::recv_tagged(int peer, void* data, size_t bytes, uint64_t tag) {
  post(true, peer, data, bytes, tag, bytes);
}

void Io::post(bool is_recv, int peer, void* data, size_t bytes, uint64_t tag, uint64_t expected,
              ucp_datatype_t datatype) {
  UcxGroup* group = op_.group;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  if (datatype != ucp_dt_make_contig(1)) {
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
    param.datatype = datatype;
  }
  param.user_data = this;
  early_ = Early{};
  void* request;
  if (is_recv) {
    // A receive needs no endpoint, but connecting lets UCX report the peer's failure.
    ucp_ep_h ep = nullptr;
    Status st = group->endpoint(peer, false, &ep);
    if (!st.ok()) return fail(st.code, describe(true, bytes, peer) + ": " + st.message);
    // UCX 1.13 does not fill recv_info when a waiting message completes the receive inside
    // this call: denying immediate completion makes it report every length to on_recv.
    param.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.cb.recv = &Io::on_recv;
    request = ucp_tag_recv_nbx(group->worker(), data, bytes, tag, tags::kFullMask, &param);
    if (request == nullptr)
      return fail(PG_ERR_BACKEND, describe(true, bytes, peer) + ": UCX completed it unreported");
  } else {
    ucp_ep_h ep = nullptr;
    Status st = group->endpoint(peer, true, &ep);
    if (!st.ok()) return fail(st.code, describe(false, bytes, peer) + ": " + st.message);
    param.cb.send = &Io::on_send;
    request = ucp_tag_send_nbx(ep, data, bytes, tag, &param);
    if (request == nullptr) return;  // buffered or sent at once
  }
  if (UCS_PTR_IS_ERR(request)) {
    const ucs_status_t st = UCS_PTR_STATUS(request);
    return fail(status_of(st), describe(is_recv, bytes, peer) + ": " + ucs_status_string(st));
  }
  if (request == early_.request) {  // completed and released inside the call
    Status st = outcome(is_recv, early_.status, early_.length, expected, peer);
    if (!st.ok()) fail(st.code, std::move(st.message));
    early_ = Early{};
    return;
  }
  auto* slot = static_cast<RequestSlot*>(request);
  slot->io = this;
  slot->op = &op_;
  slot->peer = peer;
  slot->is_recv = is_recv;
  slot->expected = expected;
  attach(slot);
}

void Io::attach(RequestSlot* slot) {
  slot->prev = nullptr;
  slot->next = head_;
  if (head_ != nullptr) head_->prev = slot;
  head_ = slot;
  if (pending_++ == 0) IoList::link(this);
  ++op_.pending;
  if (!slot->is_recv) op_.group->count_sends(1);
}

void Io::detach(RequestSlot* slot) {
  if (slot->prev != nullptr) slot->prev->next = slot->next;
  if (slot->next != nullptr) slot->next->prev = slot->prev;
  if (head_ == slot) head_ = slot->next;
  if (--pending_ == 0) {
    IoList::unlink(this);
    if (waiter_) {
      op_.group->resume_later(&op_, waiter_);
      waiter_ = {};
    }
  }
}

void Io::fail(pg_status_t code, std::string message) {
  if (error_.ok()) error_ = Status::error(code, std::move(message));
}

Status Io::await_resume() {
  Status st = std::move(error_);
  error_ = Status{};
  return st;
}

int Io::first_waited_peer() const {
  for (const RequestSlot* s = head_; s != nullptr; s = s->next) {
    if (s->is_recv) return s->peer;
  }
  return head_ != nullptr ? head_->peer : -1;
}

bool Io::waits_on(int peer) const {
  for (const RequestSlot* s = head_; s != nullptr; s = s->next) {
    if (s->peer == peer) return true;
  }
  return false;
}

void Io::cancel_receives(ucp_worker_h worker) {
  for (RequestSlot* s = head_; s != nullptr; s = s->next) {
    if (s->is_recv) ucp_request_cancel(worker, s);
  }
}

void Io::init_slot(void* request) { *static_cast<RequestSlot*>(request) = RequestSlot{}; }

void Io::on_send(void* request, ucs_status_t status, void* user_data) {
  finish(request, status, kAnySize, user_data);
}

void Io::on_recv(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                 void* user_data) {
  // A truncated message's length is the sender's (UCX wrote only what fitted).
  const bool sized = status == UCS_OK || status == UCS_ERR_MESSAGE_TRUNCATED;
  finish(request, status, sized && info != nullptr ? info->length : kAnySize, user_data);
}

void Io::finish(void* request, ucs_status_t status, uint64_t length, void* user_data) {
  auto* slot = static_cast<RequestSlot*>(request);
  Op* op = slot->op;
  if (op == nullptr) {  // inside ucp_tag_*_nbx: post() has not attached it yet
    static_cast<Io*>(user_data)->early_ = Early{request, status, length};
    ucp_request_free(request);
    return;
  }
  Io* io = slot->io;
  if (io != nullptr) {
    Status st = outcome(slot->is_recv, status, length, slot->expected, slot->peer);
    if (!st.ok()) io->fail(st.code, std::move(st.message));
    io->detach(slot);
  }
  if (!slot->is_recv) op->group->count_sends(-1);
  slot->io = nullptr;
  slot->op = nullptr;
  slot->prev = slot->next = nullptr;
  ucp_request_free(request);
  if (--op->pending == 0) op->group->requests_done(op);
}

}  // namespace procgroup::ucx_backend
