// Tagged sends and receives awaited together (see ucx_io.h).
#include "ucx_io.h"

#include <limits>
#include <string>
#include <utility>

#include "op_fingerprint.h"
#include "procgroup/backend_kit/dtype.hpp"
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

// Whether the sender of a completed receive passed other arguments: the bits of its tag
// this rank's receive did not match on.
bool other_arguments(const RequestSlot& slot, uint64_t sender_tag) {
  switch (slot.check) {
    case Check::kCollective:
    case Check::kConfirm: return tags::fingerprint_of(sender_tag) != tags::fingerprint_of(slot.tag);
    case Check::kP2p: return tags::p2p_dtype(sender_tag) != tags::p2p_dtype(slot.tag);
    default: return false;
  }
}

// The message of a receive that got another size (other_size) or a message of other
// arguments (other_args): what differs, as far as sizes and tags tell.
Status mismatch(const RequestSlot& slot, bool other_size, bool other_args, uint64_t length,
                uint64_t sender_tag) {
  const std::string who = "rank " + std::to_string(slot.peer);
  const std::string head = describe(true, slot.expected, slot.peer) + ": " + who;
  const bool sized = length != kAnySize && length != slot.expected;
  const std::string sent = sized ? std::to_string(length) + " bytes"
                                 : "more than " + std::to_string(slot.expected) + " bytes";
  std::string args;  // "" when only root or count differ (or nothing)
  if (other_args && slot.check == Check::kP2p) {
    args = std::string("dtype ") + kit::dtype_name(pg_dtype_t(tags::p2p_dtype(sender_tag))) +
           " where this rank passed " + kit::dtype_name(pg_dtype_t(tags::p2p_dtype(slot.tag)));
  } else if (other_args) {
    args = differences(tags::fingerprint_of(sender_tag), tags::fingerprint_of(slot.tag));
  }
  if (slot.check == Check::kConfirm) {
    // Only a rank that thinks it is the root sends this rank data in a rooted collective.
    return Status::error(PG_ERR_MISMATCH, who + " sent " + sent + " where this rank, the root, " +
                                              "expected its confirmation: the ranks passed " +
                                              "different roots" +
                                              (args.empty() ? "" : " (" + args + ")"));
  }
  if (!args.empty()) {
    return Status::error(PG_ERR_MISMATCH, head + " called this operation with other arguments (" +
                                              args + ")" + (other_size ? "; it sent " + sent : ""));
  }
  if (other_size) {
    return Status::error(PG_ERR_MISMATCH,
                         head + " sent " + sent + " (the ranks passed different counts)");
  }
  return Status::error(PG_ERR_MISMATCH, head + " called this operation with another root or count");
}

// How a completed request ended. A receive that arrived must have the size this rank
// expected, from a sender that passed the same arguments: UCX reports a larger message as
// truncated (it wrote nothing past the buffer) and a smaller one as a short length. Any
// difference is PG_ERR_MISMATCH; else UCX's status. Builds no strings when all went well
// (every request comes here).
Status outcome(const RequestSlot& slot, ucs_status_t status, uint64_t length, uint64_t sender_tag) {
  if (slot.is_recv && (status == UCS_OK || status == UCS_ERR_MESSAGE_TRUNCATED)) {
    const bool other_size = status == UCS_ERR_MESSAGE_TRUNCATED || length != slot.expected;
    const bool other_args = other_arguments(slot, sender_tag);
    if (other_size || other_args) return mismatch(slot, other_size, other_args, length, sender_tag);
  }
  if (status == UCS_OK) return {};
  const std::string who = "rank " + std::to_string(slot.peer);
  const char* what = slot.is_recv ? "recv from " : "send to ";
  if (status == UCS_ERR_CANCELED) return Status::error(PG_ERR_ABORTED, what + who + ": cancelled");
  return Status::error(status_of(status), what + who + ": " + ucs_status_string(status));
}

}  // namespace

// (ucx_io.h) "dtype i32 where this rank passed f32, reduce op max where this rank passed sum": the
// fields of two fingerprints that differ, but for root and count ("" when only they do).
std::string differences(uint16_t theirs, uint16_t mine) {
  const OpFingerprint::Fields t = OpFingerprint{theirs}.fields();
  const OpFingerprint::Fields m = OpFingerprint{mine}.fields();
  std::string text;
  auto add = [&](const std::string& what, const char* got, const char* want) {
    text += (text.empty() ? "" : ", ") + what + " " + got + " where this rank passed " + want;
  };
  if (t.op != m.op) add("operation", op_name(pg_op_t(t.op)), op_name(pg_op_t(m.op)));
  if (t.dtype != m.dtype) {
    add("dtype", kit::dtype_name(pg_dtype_t(t.dtype)), kit::dtype_name(pg_dtype_t(m.dtype)));
  }
  if (t.reduce_op != m.reduce_op && t.op == m.op) {
    add("reduce op", kit::reduce_op_name(pg_reduce_op_t(t.reduce_op)),
        kit::reduce_op_name(pg_reduce_op_t(m.reduce_op)));
  }
  return text;
}

Io::~Io() {
  if (head_ == nullptr) return;
  // Only an algorithm that returns early (on an error) leaves requests behind; the group
  // is breaking, which completes the sends (endpoints force-closed); receives we cancel.
  ucp_worker_h worker = op_.group->worker();
  for (RequestSlot* s = head_; s != nullptr;) {
    RequestSlot* after = s->next;
    s->io = nullptr;
    s->prev = s->next = nullptr;
    if (s->is_recv && worker != nullptr) ucp_request_cancel(worker, s);
    s = after;
  }
  head_ = nullptr;
  list_remove(op_.ios, this);
}

void Io::send(int peer, const void* data, size_t bytes, uint64_t step) {
  post(false, peer, const_cast<void*>(data), bytes,
       tags::collective(op_.rank, op_.number, step, op_.fingerprint), Check::kNone);
}

void Io::recv(int peer, void* data, size_t bytes, uint64_t step) {
  post(true, peer, data, bytes, tags::collective(peer, op_.number, step, op_.fingerprint),
       Check::kCollective);
}

void Io::recv_reduce(int peer, ReduceInto* into, uint64_t step) {
  post(true, peer, into, into->bytes, tags::collective(peer, op_.number, step, op_.fingerprint),
       Check::kCollective, op_.group->reduce_datatype());
}

void Io::send_tagged(int peer, const void* data, size_t bytes, uint64_t tag) {
  post(false, peer, const_cast<void*>(data), bytes, tag, Check::kNone);
}

void Io::recv_tagged(int peer, void* data, size_t bytes, uint64_t tag) {
  post(true, peer, data, bytes, tag, Check::kP2p);
}

// The highest step: no algorithm gets there within one collective between one pair.
constexpr uint64_t kConfirmStep = tags::kStepBits >> 16;

void Io::send_confirm(int peer) {
  static const std::byte kNothing[1] = {};
  post(false, peer, const_cast<std::byte*>(kNothing), 0,
       tags::collective(op_.rank, op_.number, kConfirmStep, op_.fingerprint), Check::kNone);
}

void Io::recv_confirm(int peer) {
  static std::byte sink[1];  // zero bytes are written; a larger message is truncated
  post(true, peer, sink, 0, tags::collective(peer, op_.number, kConfirmStep, op_.fingerprint),
       Check::kConfirm);
}

void Io::post(bool is_recv, int peer, void* data, size_t bytes, uint64_t tag, Check check,
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
  // A receive needs no endpoint, but connecting lets UCX report the peer's failure.
  ucp_ep_h ep = nullptr;
  if (Status st = group->endpoint(peer, !is_recv, &ep); !st.ok()) {
    return fail(st.code, describe(is_recv, bytes, peer) + ": " + st.message);
  }
  void* request;
  if (is_recv) {
    const uint64_t mask = check == Check::kCollective ? tags::kCollectiveMatch
                          : check == Check::kConfirm  ? tags::kConfirmMatch
                                                      : tags::kP2pMatch;
    // UCX 1.13 does not fill recv_info when a waiting message completes the receive inside
    // this call: denying immediate completion makes it report every length to on_recv.
    param.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.cb.recv = &Io::on_recv;
    request = ucp_tag_recv_nbx(group->worker(), data, bytes, tag, mask, &param);
    if (request == nullptr)
      return fail(PG_ERR_BACKEND, describe(true, bytes, peer) + ": UCX completed it unreported");
  } else {
    param.cb.send = &Io::on_send;
    request = ucp_tag_send_nbx(ep, data, bytes, tag, &param);
    if (request == nullptr) return;  // buffered or sent at once
  }
  if (UCS_PTR_IS_ERR(request)) {
    const ucs_status_t st = UCS_PTR_STATUS(request);
    return fail(status_of(st), describe(is_recv, bytes, peer) + ": " + ucs_status_string(st));
  }
  RequestSlot mine{};
  mine.expected = is_recv ? bytes : kAnySize;
  mine.tag = tag;
  mine.peer = peer;
  mine.is_recv = is_recv;
  mine.check = check;
  if (request == early_.request) {  // completed and released inside the call
    Status st = outcome(mine, early_.status, early_.length, early_.sender_tag);
    if (!st.ok()) fail(st.code, std::move(st.message));
    early_ = Early{};
    return;
  }
  auto* slot = static_cast<RequestSlot*>(request);
  *slot = mine;
  slot->io = this;
  slot->op = &op_;
  attach(slot);
}

void Io::attach(RequestSlot* slot) {
  if (head_ == nullptr) list_push(op_.ios, this);  // its first outstanding request
  list_push(head_, slot);
  ++op_.pending;
  if (!slot->is_recv) op_.group->count_sends(1);
}

void Io::detach(RequestSlot* slot) {
  list_remove(head_, slot);
  if (head_ == nullptr) {
    list_remove(op_.ios, this);
    if (waiter_) {
      op_.group->resume_later(&op_, waiter_);
      waiter_ = {};
    }
  }
}

void Io::fail(pg_status_t code, std::string message) {
  if (error_.ok()) error_ = Status::error(code, std::move(message));
}

Status Io::await_resume() { return std::exchange(error_, Status{}); }

int Io::first_waited_peer() const {
  for (const RequestSlot* s = head_; s != nullptr; s = s->next) {
    if (s->is_recv) return s->peer;
  }
  return head_ != nullptr ? head_->peer : -1;
}

void Io::cancel_receives(ucp_worker_h worker) {
  for (RequestSlot* s = head_; s != nullptr; s = s->next) {
    if (s->is_recv) ucp_request_cancel(worker, s);
  }
}

void Io::init_slot(void* request) { *static_cast<RequestSlot*>(request) = RequestSlot{}; }

void Io::on_send(void* request, ucs_status_t status, void* user_data) {
  finish(request, status, kAnySize, 0, user_data);
}

void Io::on_recv(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                 void* user_data) {
  // A truncated message's length is the sender's (UCX wrote only what fitted).
  const bool sized = status == UCS_OK || status == UCS_ERR_MESSAGE_TRUNCATED;
  const bool known = sized && info != nullptr;
  finish(request, status, known ? info->length : kAnySize, known ? info->sender_tag : 0, user_data);
}

void Io::finish(void* request, ucs_status_t status, uint64_t length, uint64_t sender_tag,
                void* user_data) {
  auto* slot = static_cast<RequestSlot*>(request);
  Op* op = slot->op;
  if (op == nullptr) {  // inside ucp_tag_*_nbx: post() has not attached it yet
    static_cast<Io*>(user_data)->early_ = Early{request, status, length, sender_tag};
    ucp_request_free(request);
    return;
  }
  Io* io = slot->io;
  if (io != nullptr) {
    Status st = outcome(*slot, status, length, sender_tag);
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
