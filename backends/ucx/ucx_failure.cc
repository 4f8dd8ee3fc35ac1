// Failures of a ucx group: lost peers, timeouts, abort, and the notices ranks send each other
// (see the failure model in ucx_group.h).
//
// Control messages use tag kind 2 and carry [kind u8][pad x3][code i32][source i32]
// [text length u32][text] (UCX 1.13 does not report sender and length when a receive
// completes at once, so the message says them itself):
//   kind 1, notice:  "this rank broke the group, because <text>": the receiver breaks too
//   kind 2, goodbye: "this rank destroyed the group": its endpoint closing is no failure
//   kind 3, hello:   "this rank is connected to you" (group_create waits for all of them)
#include <cstring>
#include <map>

#include "ucx_group.h"
#include "ucx_io.h"
#include "ucx_tags.h"

namespace procgroup::ucx_backend {
namespace {

// The bytes before a control message's text (the layout above).
struct ControlHeader {
  uint8_t kind;
  uint8_t pad[3];
  int32_t code, source;
  uint32_t length;  // of the text
};
constexpr size_t kHeader = 16;
static_assert(sizeof(ControlHeader) == kHeader);
constexpr auto kControlNoticeLimit = std::chrono::milliseconds(50);
constexpr auto kDrainLimit = std::chrono::seconds(2);
constexpr auto kShortDrain = std::chrono::milliseconds(300);

// The ranks op still expects a message from: "rank 1", "ranks 0, 2", or "".
std::string waited_ranks(const Op& op) {
  std::map<int, bool> peers;
  for (const Io* io = op.ios; io != nullptr; io = io->next) {
    io->for_each_pending([&](int peer, bool is_recv) {
      if (is_recv) peers[peer] = true;
    });
  }
  std::string list;
  for (const auto& entry : peers) list += (list.empty() ? "" : ", ") + std::to_string(entry.first);
  if (list.empty()) return list;
  return (peers.size() == 1 ? "rank " : "ranks ") + list;
}

}  // namespace

// ---- Callbacks (inside ucp_worker_progress: record only) --------------------------------

void UcxGroup::on_ep_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* peer = static_cast<PeerArg*>(arg);
  peer->group->failed_peers_.emplace_back(peer->peer, status);
}

void UcxGroup::on_control(void* request, ucs_status_t status, const ucp_tag_recv_info_t*,
                          void* user_data) {
  auto* group = static_cast<UcxGroup*>(user_data);
  group->control_request_ = nullptr;
  if (status == UCS_OK) group->control_arrived_ = true;
  ucp_request_free(request);
}

void UcxGroup::post_control_recv() {
  if (shut_down_ || stopping_ || worker_.get() == nullptr) return;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.recv = &UcxGroup::on_control;
  param.user_data = this;
  void* request = ucp_tag_recv_nbx(worker_.get(), control_buf_.data(), control_buf_.size(),
                                   tags::control(0), tags::kKindMask, &param);
  if (request == nullptr) {
    control_arrived_ = true;  // one was waiting; handled by the next poll
  } else if (UCS_PTR_IS_ERR(request)) {
    log(PG_LOG_WARN, std::string("cannot receive control messages: ") +
                         ucs_status_string(UCS_PTR_STATUS(request)));
  } else {
    control_request_ = request;
  }
}

// ---- Handling, after progress returned ----------------------------------------------------

void UcxGroup::handle_control() {
  control_arrived_ = false;  // post_control_recv() below may find the next one waiting
  ControlHeader h{};
  std::memcpy(&h, control_buf_.data(), kHeader);
  if (h.source >= 0 && h.source < size_ && h.length <= control_buf_.size() - kHeader) {
    const std::string text(control_buf_.data() + kHeader, h.length);
    if (h.kind == kControlHello) {
      greeted_.insert(h.source);
    } else if (h.kind == kControlGoodbye) {
      // Whatever it sent us arrived before this; a receive still unmatched from it can
      // only end by its timeout.
      departed_[h.source] = 1;
    } else if (h.kind == kControlNotice && !broken_) {
      // A peer's lost peer, timeout or count mismatch is this rank's too: its running
      // operations cannot complete for the same reason (as on gloo, where every rank sees
      // the timeout itself). group_abort and internal errors elsewhere are aborts here.
      const bool same =
          h.code == PG_ERR_PEER_LOST || h.code == PG_ERR_TIMEOUT || h.code == PG_ERR_MISMATCH;
      break_group(same ? static_cast<pg_status_t>(h.code) : PG_ERR_ABORTED,
                  "rank " + std::to_string(h.source) + " failed: " + text, false);
    }
  }
  post_control_recv();
}

void UcxGroup::handle_peer_failures() {
  std::vector<std::pair<int, ucs_status_t>> failed;
  failed.swap(failed_peers_);
  for (const auto& [peer, status] : failed) {
    if (broken_) return;
    if (departed_[peer]) {
      // It said goodbye: its endpoint going away is expected. Close ours.
      if (eps_[peer] != nullptr) {
        if (void* request = close_ep(eps_[peer], true)) ucp_request_free(request);
        eps_[peer] = nullptr;
      }
      continue;
    }
    break_group(PG_ERR_PEER_LOST,
                "connection to rank " + std::to_string(peer) +
                    " lost (UCX: " + ucs_status_string(status) + ")",
                true);
  }
}

void UcxGroup::notify_peers(uint8_t kind, pg_status_t code, const std::string& text) {
  const std::string body = text.substr(0, control_buf_.size() - kHeader);
  const ControlHeader h{kind, {}, code, rank_, static_cast<uint32_t>(body.size())};
  notice_.assign(reinterpret_cast<const char*>(&h), kHeader);
  notice_ += body;
  std::vector<void*> sending;
  ucp_request_param_t param{};
  for (const auto& [peer, ep] : eps_) {  // the peers this rank is connected to
    if (peer == rank_ || ep == nullptr || departed_[peer]) continue;
    void* request =
        ucp_tag_send_nbx(ep, notice_.data(), notice_.size(), tags::control(rank_), &param);
    if (request != nullptr && !UCS_PTR_IS_ERR(request)) sending.push_back(request);
  }
  // Best effort: a peer that is gone or slow learns it from its own timeout.
  finish_requests(worker_.get(), std::move(sending), Clock::now() + kControlNoticeLimit);
}

// ---- Timeouts ---------------------------------------------------------------------------

void UcxGroup::check_deadlines(Clock::time_point now) {
  if (broken_) {
    if (ops_ != nullptr && now >= drain_until_) abandon_running();
    return;
  }
  std::string first;
  for (Op* op = ops_; op != nullptr; op = op->next) {
    if (op->task_done || now < op->deadline) continue;
    int peer = -1;
    for (const Io* io = op->ios; io != nullptr && peer < 0; io = io->next) {
      peer = io->first_waited_peer();
    }
    if (peer < 0 && shm_.arrival.op == op) peer = shm_.first_missing(shm_.arrival.seq);
    const int64_t ms = op->desc.timeout_ms > 0 ? op->desc.timeout_ms : timeout_.count();
    std::string what = op_label(op->desc) + " timed out after " + std::to_string(ms) + " ms" +
                       (peer >= 0 ? " waiting for rank " + std::to_string(peer) : "");
    op->failure = Status::error(PG_ERR_TIMEOUT, what);
    if (first.empty()) first = what;
    // What was still outstanding, for the log: "recv from 1 x2, send to 3 x1".
    std::map<std::pair<int, bool>, int> pending;
    for (const Io* io = op->ios; io != nullptr; io = io->next) {
      io->for_each_pending([&](int p, bool is_recv) { ++pending[{p, is_recv}]; });
    }
    std::string detail;
    for (const auto& [key, count] : pending) {
      detail += (detail.empty() ? "" : ", ") + std::string(key.second ? "recv from " : "send to ") +
                std::to_string(key.first) + " x" + std::to_string(count);
    }
    log(PG_LOG_INFO, what + "; outstanding: " + (detail.empty() ? "none" : detail));
  }
  if (!first.empty()) break_group(PG_ERR_TIMEOUT, first, true);
}

// ---- Breaking ---------------------------------------------------------------------------

void UcxGroup::break_group(pg_status_t code, const std::string& reason, bool tell_peers) {
  if (broken_) return;
  broken_ = true;
  broken_code_ = code;
  broken_cause_ = reason;
  drain_until_ = Clock::now() + kDrainLimit;
  log(code == PG_ERR_ABORTED ? PG_LOG_INFO : PG_LOG_ERROR,
      "group '" + group_id_ + "' broken: " + reason);
  // A lost peer, a timeout, a count mismatch or a backend error stops every running work
  // for the same reason: each fails with that status. Anything else aborts them.
  const bool keep = code == PG_ERR_PEER_LOST || code == PG_ERR_BACKEND || code == PG_ERR_TIMEOUT ||
                    code == PG_ERR_MISMATCH;
  for (Op* op = ops_; op != nullptr; op = op->next) {
    if (!op->failure.ok()) continue;
    if (!keep) {
      op->failure = Status::error(PG_ERR_ABORTED, op_label(op->desc) + ": aborted: " + reason);
    } else if (code == PG_ERR_TIMEOUT) {
      // Another operation's timeout (here or on a peer): say whom this one waited for.
      const std::string waited = waited_ranks(*op);
      op->failure = Status::error(code, op_label(op->desc) + ": timed out: " + reason +
                                            (waited.empty() ? "" : "; waiting here for " + waited));
    } else {
      op->failure = Status::error(code, op_label(op->desc) + ": " + reason);
    }
  }
  if (tell_peers) notify_peers(kControlNotice, code, reason);
  for (Op* op = ops_; op != nullptr; op = op->next) {
    for (Io* io = op->ios; io != nullptr; io = io->next) io->cancel_receives(worker_.get());
  }
  if (shm_.arrival.op != nullptr) {  // it waits for peers' slots: it fails as it resumes
    resume_later(shm_.arrival.op, shm_.arrival.handle);
    shm_.arrival = {};
  }
  if (err_mode_ == UCP_ERR_HANDLING_MODE_PEER) {
    // Forced closing completes every send still queued on an endpoint (with an error).
    close_endpoints(true, Clock::now() + kControlNoticeLimit);
  } else {
    // Without peer error handling a forced close is undefined for the peer; sends that no
    // peer will take are abandoned soon instead (UCX only reads their buffers).
    drain_until_ = Clock::now() + kShortDrain;
  }
  waker_.wake();  // a poller asleep in epoll looks again
}

void UcxGroup::abandon_running() {
  // UCX never completed these requests: the works end anyway (the group is broken, and
  // break_group gave each running op its failure: no op starts once it is), the ops stay
  // allocated until the worker is destroyed, since UCX may still call back.
  while (ops_ != nullptr) {
    Op* op = ops_;
    list_remove(ops_, op);
    op->finished = true;
    op->work->complete(op->failure);
    abandoned_.emplace_back(op);
  }
  if (sleeping_waiters_ > 0) waiters_cv_.notify_all();
}

void UcxGroup::drain(Clock::time_point until) {
  while (ops_ != nullptr && Clock::now() < until) poll_once();
  if (ops_ != nullptr) abandon_running();
}

}  // namespace procgroup::ucx_backend
