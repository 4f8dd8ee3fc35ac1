// Size-checked send/recv over Gloo's unbound buffers (see gloo_p2p.h).
#include "gloo_p2p.h"

#include <cstring>
#include <string>

namespace procgroup::gloo_backend {
namespace {

constexpr uint32_t kWireMagic = 0x50475032;  // "PGP2"
constexpr uint16_t kInlineFlag = 1;

// Host byte order: both ends are this build of the plugin on the same kind of machine.
struct WireHeader {
  uint32_t magic;
  uint16_t dtype;
  uint16_t flags;
  uint64_t nbytes;
};
static_assert(sizeof(WireHeader) == 16, "the header is 16 bytes on the wire");

std::string describe(uint16_t dtype, uint64_t nbytes) {
  const size_t es = kit::dtype_size(static_cast<pg_dtype_t>(dtype));
  std::string text = std::string(kit::dtype_name(static_cast<pg_dtype_t>(dtype)));
  if (es > 0 && nbytes % es == 0) return text + " x " + std::to_string(nbytes / es);
  return text + ", " + std::to_string(nbytes) + " bytes";
}

}  // namespace

// ---- RecvOrder ----------------------------------------------------------------------

uint64_t RecvOrder::take_ticket(int peer, uint64_t tag) {
  std::lock_guard<std::mutex> lock(mu_);
  return queues_[{peer, tag}].issued++;
}

bool RecvOrder::wait_turn(int peer, uint64_t tag, uint64_t ticket, Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  auto turn_or_abort = [&] {
    if (aborted_) return true;
    auto it = queues_.find({peer, tag});
    return it != queues_.end() && it->second.serving == ticket;
  };
  return kit::wait_until(cv_, lock, deadline, turn_or_abort) && !aborted_;
}

void RecvOrder::next_turn(int peer, uint64_t tag) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = queues_.find({peer, tag});
    if (it == queues_.end()) return;
    // An idle queue is dropped, so the map holds only tags with receives in flight.
    if (++it->second.serving == it->second.issued) queues_.erase(it);
  }
  cv_.notify_all();
}

void RecvOrder::abort() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
  }
  cv_.notify_all();
}

// ---- P2pTransfer --------------------------------------------------------------------

P2pTransfer::P2pTransfer(gloo::Context& context, const pg_backend_op_t& op, const Plan& plan,
                         RecvOrder& order)
    : context_(context), op_(op), plan_(plan) {
  const size_t bytes = plan.bytes();
  if (op.op == PG_OP_SEND) {
    const bool in_line = bytes <= kInlineBytes;
    const WireHeader h{kWireMagic, static_cast<uint16_t>(plan.dtype),
                       static_cast<uint16_t>(in_line ? kInlineFlag : 0), bytes};
    frame_.resize(sizeof(h) + (in_line ? bytes : 0));
    std::memcpy(frame_.data(), &h, sizeof(h));
    if (in_line && bytes > 0) std::memcpy(frame_.data() + sizeof(h), plan.out, bytes);
    frame_buf_ = context.createUnboundBuffer(frame_.data(), frame_.size());
    frame_buf_->send(op.peer, header_slot(op.tag));
    if (!in_line) {
      payload_buf_ = context.createUnboundBuffer(plan.out, bytes);
      payload_buf_->send(op.peer, payload_slot(op.tag));
    }
    return;
  }
  ticket_ = order.take_ticket(op.peer, op.tag);
  frame_.resize(sizeof(WireHeader) + kInlineBytes);
  frame_buf_ = context.createUnboundBuffer(frame_.data(), frame_.size());
  frame_buf_->recv(op.peer, header_slot(op.tag));
}

Status P2pTransfer::finish(Clock::time_point deadline, RecvOrder& order) {
  if (op_.op == PG_OP_RECV) return finish_recv(deadline, order);
  if (!frame_buf_->waitSend(left_until(deadline)) ||
      (payload_buf_ && !payload_buf_->waitSend(left_until(deadline)))) {
    return Status::error(PG_ERR_ABORTED, op_label(op_) + ": aborted");
  }
  return {};
}

Status P2pTransfer::finish_recv(Clock::time_point deadline, RecvOrder& order) {
  const std::string label = op_label(op_);
  const std::string from = "rank " + std::to_string(op_.peer);
  auto aborted = [&] { return Status::error(PG_ERR_ABORTED, label + ": aborted"); };
  if (!frame_buf_->waitRecv(left_until(deadline))) return aborted();
  WireHeader h;
  std::memcpy(&h, frame_.data(), sizeof(h));
  const bool in_line = (h.flags & kInlineFlag) != 0;
  if (h.magic != kWireMagic || (in_line && h.nbytes > kInlineBytes)) {
    return Status::error(PG_ERR_BACKEND, label + ": malformed message header from " + from +
                                             " (is it running the same procgroup build?)");
  }
  const size_t mine = plan_.bytes();
  const bool match = h.nbytes == mine && (mine == 0 || h.dtype == plan_.dtype);
  if (!order.wait_turn(op_.peer, op_.tag, ticket_, deadline)) {
    if (Clock::now() < deadline) return aborted();
    return Status::error(PG_ERR_TIMEOUT, label + ": timed out behind an earlier recv from " + from +
                                             " with the same tag");
  }
  if (!in_line) {
    // Post where the payload must land (or scratch), then let the next receive go.
    std::byte* into = plan_.out;
    if (!match) {
      drain_ = std::make_unique_for_overwrite<std::byte[]>(h.nbytes == 0 ? 1 : h.nbytes);
      into = drain_.get();
    }
    try {
      payload_buf_ = context_.createUnboundBuffer(into, h.nbytes);
      payload_buf_->recv(op_.peer, payload_slot(op_.tag));
    } catch (...) {
      order.next_turn(op_.peer, op_.tag);
      throw;
    }
  }
  order.next_turn(op_.peer, op_.tag);
  if (!in_line && !payload_buf_->waitRecv(left_until(deadline))) return aborted();
  if (!match) {
    return Status::error(PG_ERR_MISMATCH,
                         label + ": " + from + " sent " + describe(h.dtype, h.nbytes) +
                             " but this recv expects " + describe(plan_.dtype, mine) +
                             "; nothing was written to the buffer (a send and its recv must "
                             "agree on dtype and count)");
  }
  if (in_line && mine > 0) std::memcpy(plan_.out, frame_.data() + sizeof(h), mine);
  return {};
}

}  // namespace procgroup::gloo_backend
