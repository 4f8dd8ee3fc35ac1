// UCX group: rendezvous, endpoints, issuing operations, shutdown (see ucx_group.h).
#include "ucx_group.h"

#include <algorithm>
#include <cstdlib>

#include "ucx_io.h"
#include "ucx_tags.h"

namespace procgroup::ucx_backend {
namespace {

constexpr int64_t kMaxTimeoutMs = int64_t{7} * 24 * 3600 * 1000;
constexpr auto kCloseLimit = std::chrono::seconds(2);
constexpr size_t kControlBytes = 512;

std::chrono::milliseconds clamped(int64_t ms) {
  return std::chrono::milliseconds(std::clamp<int64_t>(ms, 1, kMaxTimeoutMs));
}

std::string address_key(int rank) { return "ucx/addr/" + std::to_string(rank); }

// Transports for a group whose ranks share a host, when the user did not choose (UCX_TLS):
// - no TCP: UCX would use shared memory for every peer anyway, but progressing its TCP
//   interfaces costs an epoll_wait system call per ucp_worker_progress, several times the
//   shared-memory latency;
// - no CMA: process_vm_readv pins pages on every call; measured 3-4 GB/s here against
//   9-22 GB/s for memcpy, while rendezvous through the FIFOs (copies through a cache-resident
//   ring) ran 2-3x faster for 4-64 MiB allreduces. xpmem/knem, where installed, stay in.
constexpr const char* kLocalTransports = "^tcp,cma";

// Larger one-host groups make no shared-memory windows: each chunk's handshake is
// all-to-all, and every rank maps every peer's window.
constexpr int kMaxShmRanks = 8;
}  // namespace

UcxGroup::UcxGroup(const pg_backend_group_config_t& config, const pg_host_services_t* host)
    : host_(host),
      store_(config.store),
      rank_(config.rank),
      size_(config.size),
      local_size_(config.local_size),
      timeout_(clamped(config.timeout_ms)),
      group_id_(config.group_id != nullptr ? config.group_id : ""),
      master_addr_(config.master_addr != nullptr && *config.master_addr != '\0' ? config.master_addr
                                                                                : "MASTER_ADDR"),
      tuning_(Tuning::from_env()),
      spin_us_(tuning_.spin_us) {}

Status UcxGroup::create(const pg_backend_group_config_t& config, const pg_host_services_t* host,
                        std::shared_ptr<UcxGroup>* out) {
  std::shared_ptr<UcxGroup> group(new UcxGroup(config, host));
  if (Status st = group->connect(); !st.ok()) {
    return Status::error(st.code, "ucx: group '" + group->group_id_ + "' (rank " +
                                      std::to_string(group->rank_) + " of " +
                                      std::to_string(group->size_) + "): " + st.message);
  }
  group->progress_thread_ = std::thread([g = group.get()] { g->progress_loop(); });
  *out = std::move(group);
  return {};
}

Status UcxGroup::connect() {
  if (size_ > tags::kMaxRanks) {
    return Status::error(PG_ERR_UNSUPPORTED,
                         "groups are limited to " + std::to_string(tags::kMaxRanks) + " ranks");
  }
  // Without the user's UCX_TLS, a group on one host picks its transports (kLocalTransports).
  // UCX then has no transport that reports a dead peer; pidfds do that (ucx_peers.cc).
  PG_KIT_TRY(discover_hosts());
  const bool ours = one_host_ && std::getenv("UCX_TLS") == nullptr;
  PG_KIT_TRY(create_context(size_, local_size_, sizeof(RequestSlot), &Io::init_slot,
                            ours ? kLocalTransports : nullptr, &context_));
  // Shared memory has no peer error handling in UCX: asking for it would only be refused.
  if (ours) err_mode_ = UCP_ERR_HANDLING_MODE_NONE;
  PG_KIT_TRY(create_worker(context_.get(), &worker_));
  const int event_fd = worker_event_fd(worker_.get());
  wakeup_ = event_fd >= 0;
  PG_KIT_TRY(waker_.create(event_fd));
  PG_KIT_TRY(make_reduce_datatype(&reduce_dt_));
  watch_local_peers();
  const std::string address = worker_address(worker_.get());
  if (address.empty()) return Status::error(PG_ERR_BACKEND, "no worker address");
  if (const Status set = kit::Store(store_).set(address_key(rank_), address); !set.ok()) {
    return store_failure(set.code, "publishing the worker address", "");
  }
  addresses_[rank_] = address;
  endpoints_ready_ = true;
  control_buf_.assign(kControlBytes, 0);
  std::lock_guard<std::mutex> lock(mu_);
  if (size_ <= tuning_.connect_all_max) {
    for (int i = 1; i < size_; ++i) {
      PG_KIT_TRY(connect_peer((rank_ + i) % size_));
    }
  }
  post_control_recv();
  last_activity_ = Clock::now();
  if (size_ > tuning_.connect_all_max) return {};
  PG_KIT_TRY(greet_peers());
  return open_windows();
}

// Large allreduces of one-host groups read their peers' data in place (ucx_shm.h).
Status UcxGroup::open_windows() {
  if (!one_host_ || size_ < 2 || size_ > kMaxShmRanks || tuning_.shm_chunk == 0) return {};
  std::string why_not;
  const Status st = shm_.open(
      context_.get(), kit::Store(store_), rank_, size_, tuning_.shm_chunk,
      [this](int peer) { return eps_[peer]; }, timeout_, &why_not);
  if (!st.ok()) {
    return store_failure(st.code, "exchanging shared-memory windows",
                         "a peer never published its shared-memory window");
  }
  log(PG_LOG_DEBUG, shm_.ready() ? "shared-memory windows of 2 x " +
                                       std::to_string(tuning_.shm_chunk) + " bytes mapped"
                                 : "no shared-memory windows: " + why_not);
  return {};
}

// Every rank tells every peer it is connected and waits to hear the same from all: no rank
// may leave (and take its shared-memory segments along) while a peer still connects to it.
Status UcxGroup::greet_peers() {
  notify_peers(kControlHello, PG_OK, "");
  const auto until = Clock::now() + timeout_;
  while (static_cast<int>(greeted_.size()) < size_ - 1) {
    if (!poll_once()) {
      check_local_peers(1000);
      if (broken_) return Status::error(broken_code_, broken_cause_);
      if (Clock::now() >= until) {
        std::string missing;
        for (int i = 0; i < size_; ++i) {
          if (i != rank_ && !greeted_.contains(i))
            missing += (missing.empty() ? "" : ", ") + std::to_string(i);
        }
        return Status::error(PG_ERR_TIMEOUT, "ranks " + missing + " never connected");
      }
    }
  }
  return {};
}

std::chrono::milliseconds UcxGroup::op_timeout(const pg_backend_op_t& desc) const {
  return desc.timeout_ms > 0 ? clamped(desc.timeout_ms) : timeout_;
}

Status UcxGroup::fetch_address(int peer) {
  if (!addresses_[peer].empty()) return {};
  // A lazy connect runs inside operations (and holds the group's mutex): wait no longer
  // than the soonest of them has left.
  auto wait = timeout_;
  const auto now = Clock::now();
  for (const Op* op = ops_; op != nullptr; op = op->next) {
    // Never more than the op's own timeout: its deadline may sit a few ms beyond it.
    wait = std::min(
        {wait, op_timeout(op->desc),
         std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(op->deadline - now))});
  }
  if (const Status st = kit::Store(store_).get(address_key(peer), wait.count(), &addresses_[peer]);
      !st.ok()) {
    return store_failure(st.code, "reading rank " + std::to_string(peer) + "'s UCX address",
                         "rank " + std::to_string(peer) + " never published its UCX address", wait);
  }
  return {};
}

Status UcxGroup::connect_peer(int peer) {
  PG_KIT_TRY(fetch_address(peer));
  watch_if_local(peer);
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(addresses_[peer].data());
  params.err_handler.cb = &UcxGroup::on_ep_error;
  PeerArg& arg = peer_args_[peer];
  arg = PeerArg{this, peer};
  params.err_handler.arg = &arg;
  for (;;) {
    params.err_mode = err_mode_;
    ucp_ep_h ep = nullptr;
    const ucs_status_t ucs = ucp_ep_create(worker_.get(), &params, &ep);
    if (ucs == UCS_OK) {
      eps_[peer] = ep;
      return {};
    }
    if (err_mode_ == UCP_ERR_HANDLING_MODE_NONE) {
      return Status::error(status_of(ucs), "connecting to rank " + std::to_string(peer) +
                                               " failed: " + ucs_status_string(ucs));
    }
    // UCX's shared-memory transports cannot report a peer's failure: our pidfds do for
    // peers on this host; elsewhere only the group timeout would notice.
    err_mode_ = UCP_ERR_HANDLING_MODE_NONE;
    const bool covered = watched_peers_ == size_ - 1;
    log(covered ? PG_LOG_DEBUG : PG_LOG_WARN,
        std::string("the transports UCX selected cannot report peer failures (") +
            ucs_status_string(ucs) + ")" +
            (covered ? "; every peer is on this host and watched through its pidfd"
                     : "; a lost peer on another host is noticed only by the group timeout"));
  }
}

Status UcxGroup::endpoint(int peer, bool for_send, ucp_ep_h* ep) {
  if (broken_) return Status::error(PG_ERR_ABORTED, "the group failed earlier: " + broken_cause_);
  // A peer that left may still have messages on the way to us, but can take none.
  if (departed_[peer]) {
    if (!for_send) return {};
    return Status::error(PG_ERR_PEER_LOST,
                         "rank " + std::to_string(peer) + " has already destroyed the group");
  }
  if (eps_[peer] == nullptr) PG_KIT_TRY(connect_peer(peer));
  *ep = eps_[peer];
  return {};
}

std::byte* UcxGroup::lease(Op& op, size_t bytes) {
  const ScratchLease lease = pool_.take(bytes);
  if (lease.data == nullptr) throw std::bad_alloc();  // the coroutine turns it into its status
  op.leases.push_back(lease);
  return lease.data;
}

std::byte* Op::scratch(size_t bytes) { return group->lease(*this, bytes); }

// ---- Issuing ------------------------------------------------------------------------

Status UcxGroup::submit(const pg_backend_op_t& desc, std::shared_ptr<Work>* out) {
  // The op's only plan (the kit's: a caller without a core sends unchecked ops); 16: the
  // largest scratch an algorithm takes, in multiples of the message.
  auto op = std::make_unique<Op>();
  PG_KIT_TRY(kit::plan_cpu_op(desc, rank_, size_, "ucx", 16, &op->plan));
  // From the coarse clock (a fifth of the cost): a deadline a few ms late, not early.
  op->deadline = kit::lazy_deadline_after(op_timeout(desc).count());
  const auto now = kit::coarse_now();
  op->group = this;
  op->host = host_;
  op->desc = desc;
  op->rank = rank_;
  op->size = size_;
  op->work = std::make_shared<Work>(shared_from_this(), op->deadline);
  std::unique_lock<std::mutex> lock(mu_);
  for (int peer : exited_idle_) {
    if (!departed_[peer] && !broken_) break_group(PG_ERR_PEER_LOST, exit_cause(peer), true);
  }
  exited_idle_.clear();
  if (broken_ || stopping_) {
    return Status::error(PG_ERR_ABORTED,
                         op_label(desc) + ": not started: " +
                             (broken_ ? "the group failed earlier: " + broken_cause_
                                      : std::string("the group is being destroyed")));
  }
  if (desc.op != PG_OP_SEND && desc.op != PG_OP_RECV) op->number = next_collective_++;
  op->task = make_task(*op);
  Op* raw = op.release();  // owned by the running list until finalize()
  list_push(ops_, raw);
  *out = raw->work;
  last_activity_ = now;
  raw->task.start();  // posts its first messages now
  settle(raw);
  submits_.fetch_add(1);       // before kick_thread reads thread_idle_ (progress_loop)
  kick_thread(Kick::kIfIdle);  // when it idles: it returns to its short period
  return {};
}

void UcxGroup::abort() {
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_down_) return;
  break_group(PG_ERR_ABORTED, "group_abort was called", true);
  drain(Clock::now() + kCloseLimit);
}

// ---- Shutdown -----------------------------------------------------------------------

void UcxGroup::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  kick_thread(Kick::kStop);
  waker_.wake();
  if (progress_thread_.joinable()) progress_thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  if (worker_ != nullptr && endpoints_ready_) {  // else group_create failed part way
    if (ops_ != nullptr) {
      break_group(PG_ERR_ABORTED, "the group was destroyed with operations pending", true);
      drain(Clock::now() + kCloseLimit);
    }
    if (!broken_)
      notify_peers(kControlGoodbye, PG_OK, "");  // goodbye: our endpoints closing is no failure
    shm_.close(context_.get());                  // before the endpoints its rkeys were unpacked on
    close_endpoints(broken_, Clock::now() + kCloseLimit);
    if (control_request_ != nullptr) {
      ucp_request_cancel(worker_.get(), control_request_);
      const auto until = Clock::now() + kCloseLimit;
      while (control_request_ != nullptr && Clock::now() < until) {
        ucp_worker_progress(worker_.get());
      }
    }
  }
  shut_down_ = true;
  const bool kept = (broken_ || !exited_idle_.empty()) && keep_failed_worker(worker_, context_);
  if (kept) {
    log(PG_LOG_DEBUG,
        "a peer failed: this group's UCX worker is kept until the process exits "
        "(UCX before 1.14 may assert when destroying it)");
  }
  int held = 0;
  for (const auto& op : abandoned_) held += op->pending;
  if (held > 0) {
    log(PG_LOG_INFO,
        std::to_string(held) + " UCX request(s) of abandoned operations never " +
            "completed (their peers failed or left); " +
            (kept ? "left, unprogressed, with the kept worker" : "released with the worker"));
  }
  worker_.reset();  // also releases requests UCX still held for abandoned ops
  if (reduce_dt_ != 0) ucp_dt_destroy(reduce_dt_);
  abandoned_.clear();
  context_.reset();
}

UcxGroup::~UcxGroup() { shutdown(); }

void UcxGroup::close_endpoints(bool force, Clock::time_point until) {
  std::vector<void*> closing;
  for (auto& [peer, ep] : eps_) {
    if (ep == nullptr) continue;
    if (void* request = close_ep(ep, force)) closing.push_back(request);
    ep = nullptr;
  }
  // A flush waits for our last messages; a peer gone without a word ends it by the limit.
  finish_requests(worker_.get(), std::move(closing), until);
}

void UcxGroup::log(int32_t level, const std::string& message) const {
  if (host_ != nullptr && host_->log != nullptr)
    host_->log(host_->ctx, level, "ucx", message.c_str());
}

}  // namespace procgroup::ucx_backend
