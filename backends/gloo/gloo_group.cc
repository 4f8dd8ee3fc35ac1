// Gloo group: rendezvous, worker and waiter threads, failure handling (see gloo_group.h).
#include "gloo_group.h"

#include <gloo/common/error.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "gloo_mesh.h"
#include "gloo_net.h"

namespace procgroup::gloo_backend {
namespace {

constexpr size_t kMaxWaiters = 64;

// Longer timeouts mean "none": clamp them so deadlines and Gloo's waits cannot overflow.
constexpr int64_t kMaxTimeoutMs = int64_t{7} * 24 * 3600 * 1000;

std::chrono::milliseconds clamped(int64_t ms) {
  return std::chrono::milliseconds(std::clamp<int64_t>(ms, 1, kMaxTimeoutMs));
}

// Gloo's own failure path, used on purpose: when a wait on an unbound buffer times out,
// the TCP transport fails every pair of the context (wakes all pending buffers with an
// IoException, closes the sockets gracefully). A recv on this slot is never matched, so
// waiting 1 ms on it trips that path. The slot is header_slot(2^63 - 1): that tag and the one
// below it (the probe's) are reserved.
constexpr uint64_t kTripwireSlot = ~uint64_t{0};
// A recv on a pair that has failed throws the pair's stored error at once: posting one on
// this slot asks a pair whether it is the one that failed.
constexpr uint64_t kProbeSlot = kTripwireSlot - 1;

}  // namespace

// ---- Creation and destruction -------------------------------------------------------

GlooGroup::GlooGroup(const pg_backend_group_config_t& config, const pg_host_services_t* host)
    : host_(host), rank_(config.rank), size_(config.size), timeout_(clamped(config.timeout_ms)) {
  const char* algo = std::getenv("PROCGROUP_GLOO_ALLREDUCE");
  if (algo != nullptr && std::strcmp(algo, "ring") == 0) allreduce_ = AllreduceChoice::kRing;
  if (algo != nullptr && std::strcmp(algo, "bcube") == 0) allreduce_ = AllreduceChoice::kBcube;
}

Status GlooGroup::create(const pg_backend_group_config_t& config, const pg_host_services_t* host,
                         std::unique_ptr<GlooGroup>* out) {
  std::unique_ptr<GlooGroup> group(new GlooGroup(config, host));
  PG_KIT_TRY(group->connect(config));
  group->worker_ = std::thread([g = group.get()] { g->worker_loop(); });
  *out = std::move(group);
  return {};
}

Status GlooGroup::connect(const pg_backend_group_config_t& config) {
  const std::string where = "gloo: group '" + std::string(config.group_id) + "' (rank " +
                            std::to_string(rank_) + " of " + std::to_string(size_) + ")";
  NetChoice net;
  Status st = choose_interface(config.master_addr, &net);
  if (!st.ok()) return Status::error(st.code, where + ": " + st.message);
  log(PG_LOG_DEBUG, where + ": listening on " + net.description);
  ScopedSigpipeBlock no_sigpipe;  // also inherited by the device's event loop thread
  try {
    device_ = gloo::transport::tcp::CreateDevice(net.attr);
  } catch (const std::exception& e) {
    return Status::error(PG_ERR_CONFIG,
                         where + ": cannot listen on " + net.description + ": " + e.what());
  }
  try {
    auto mesh = std::make_shared<MeshContext>(rank_, size_);
    mesh->setTimeout(timeout_);
    st = mesh->connect_mesh(kit::Store(config.store), device_);
    if (!st.ok()) return Status::error(st.code, where + ": rendezvous failed: " + st.message);
    context_ = std::move(mesh);
  } catch (const gloo::IoException& e) {
    return Status::error(is_timeout(e.what()) ? PG_ERR_TIMEOUT : PG_ERR_PEER_LOST,
                         where + ": connecting to the peers failed: " + e.what());
  } catch (const std::exception& e) {
    return Status::error(PG_ERR_BACKEND, where + ": gloo setup failed: " + e.what());
  }
  return {};
}

GlooGroup::~GlooGroup() {
  bool pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending = !queue_.empty() || running_ > 0;
  }
  // Works still running at destroy were given up by the core: do not wait for them.
  if (pending) break_group(PG_ERR_ABORTED, "the group was destroyed with operations pending");
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  wait_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  for (std::thread& t : waiters_) t.join();  // no waiter starts once the worker is gone
  context_.reset();
  device_.reset();
}

// ---- Issue and execution ------------------------------------------------------------

Status GlooGroup::submit(const pg_backend_op_t& op, std::shared_ptr<Work>* out) {
  Plan plan;  // the only plan of this op: the work carries it to the worker and waiters
  PG_KIT_TRY(plan_gloo_op(op, rank_, size_, &plan));
  const auto timeout = op.timeout_ms > 0 ? clamped(op.timeout_ms) : timeout_;
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_ || stopping_) {
    return Status::error(PG_ERR_ABORTED, op_label(op) + ": not started: " + broken_cause_);
  }
  // Collective tags count collectives only (send/recv differ between ranks, tags may not)
  // and carry a hash of the arguments: see collective_tag().
  const uint32_t tag = kit::op_info(op.op).p2p ? 0 : collective_tag(next_tag_++, op, plan);
  auto work = std::make_shared<Work>(op, plan, tag, Clock::now() + timeout);
  queue_.push_back(work);
  work_cv_.notify_one();
  *out = std::move(work);
  return {};
}

void GlooGroup::worker_loop() {
  block_sigpipe_forever();
  for (;;) {
    std::shared_ptr<Work> work;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      work = std::move(queue_.front());
      queue_.pop_front();
      if (broken_) {
        lock.unlock();
        work->complete(PG_ERR_ABORTED, work->label() + ": not started: " + broken_cause_);
        continue;
      }
      ++running_;
    }
    execute(work);
    std::lock_guard<std::mutex> lock(mu_);
    --running_;
  }
}

void GlooGroup::execute(const std::shared_ptr<Work>& work) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(work->deadline - Clock::now());
  if (left.count() <= 0) {
    fail(work, Status::error(PG_ERR_TIMEOUT, work->label() + ": timed out before it could "
                                                             "start (earlier operations used "
                                                             "the time)"));
    return;
  }
  try {
    if (work->is_p2p()) {
      // Posted here, in issue order; a waiter thread waits for it, so later operations
      // (and the peer's matching ones) are not held up behind it.
      work->p2p = std::make_unique<P2pTransfer>(*context_, work->op, work->plan, recv_order_);
      std::lock_guard<std::mutex> lock(mu_);
      ++running_;  // until its waiter is done
      p2p_posted_.push_back(work);
      if (p2p_posted_.size() > idle_waiters_ && waiters_.size() < kMaxWaiters) {
        waiters_.emplace_back([this] { waiter_loop(); });
      }
      wait_cv_.notify_one();
      return;
    }
    const OpEnv env{context_, host_, rank_, size_, work->tag, left, allreduce_, &scratch_};
    Status st = run_collective(env, work->op, work->plan);
    if (st.ok()) {
      work->complete(PG_OK, "");
    } else {
      fail(work, std::move(st));
    }
  } catch (...) {
    fail(work, failure_of(*work, std::current_exception()));
  }
}

void GlooGroup::waiter_loop() {
  block_sigpipe_forever();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ++idle_waiters_;
    wait_cv_.wait(lock, [&] { return stopping_ || !p2p_posted_.empty(); });
    --idle_waiters_;
    if (p2p_posted_.empty()) return;
    std::shared_ptr<Work> work = std::move(p2p_posted_.front());
    p2p_posted_.pop_front();
    lock.unlock();
    wait_p2p(work);
    lock.lock();
    --running_;
  }
}

void GlooGroup::wait_p2p(const std::shared_ptr<Work>& work) {
  try {
    Status st = work->p2p->finish(work->deadline, recv_order_);
    work->p2p.reset();
    if (st.ok()) {
      work->complete(PG_OK, "");
    } else if (st.code == PG_ERR_MISMATCH) {
      // Both ranks stayed in step (the payload was drained): the group is still usable.
      log(PG_LOG_ERROR, st.message);
      work->complete(st.code, std::move(st.message));
    } else {
      fail(work, std::move(st));
    }
  } catch (...) {
    const Status st = failure_of(*work, std::current_exception());
    work->p2p.reset();
    fail(work, st);
  }
}

// ---- Failures -----------------------------------------------------------------------

Status GlooGroup::failure_of(const Work& work, const std::exception_ptr& error) const {
  const std::string label = work.label();
  {
    // Once the group is broken its pairs are failed on purpose: that is the cause.
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_) return Status::error(PG_ERR_ABORTED, label + ": aborted: " + broken_cause_);
  }
  try {
    std::rethrow_exception(error);
  } catch (const gloo::IoException& e) {
    const std::string what = e.what();
    std::vector<int> down;
    int peer = failed_peer(what, &down);
    if (peer < 0 && work.is_p2p()) peer = work.op.peer;
    const std::string who = peer < 0 ? "" : "rank " + std::to_string(peer);
    if (is_timeout(what)) {
      const auto timeout = work.op.timeout_ms > 0 ? clamped(work.op.timeout_ms) : timeout_;
      std::string hint;
      if (!work.is_p2p()) {
        // Facts only: whether a peer passed other arguments or is simply stopped, the
        // core's hang report finds out (and names it) from every rank's record.
        const pg_backend_op_t& op = work.op;
        const Plan& p = work.plan;
        hint = "; this rank passed " +
               (op.op == PG_OP_BARRIER
                    ? std::string("no arguments")
                    : kit::describe_args(op.op, p.dtype, p.n, op.reduce_op, op.root));
      }
      return Status::error(PG_ERR_TIMEOUT, label + ": timed out" +
                                               (who.empty() ? "" : " waiting for " + who) +
                                               " (timeout " + std::to_string(timeout.count()) +
                                               " ms): " + what + hint);
    }
    // A peer that lost someone shuts its own connections too: list every one that is
    // down, so the rank that really died is named even when another one's close came first.
    std::string others;
    for (int r : down) {
      if (r != peer) others += (others.empty() ? "rank " : ", rank ") + std::to_string(r);
    }
    if (!others.empty()) others = " (connection to " + others + " down too)";
    return Status::error(PG_ERR_PEER_LOST, label + ": connection to " +
                                               (who.empty() ? "a peer" : who) + " lost" + others +
                                               ": " + what);
  } catch (const std::bad_alloc&) {
    return Status::error(PG_ERR_OUT_OF_MEMORY, label + ": out of memory");
  } catch (const std::exception& e) {  // gloo::Exception, gloo::EnforceNotMet, ...
    return Status::error(PG_ERR_BACKEND, label + ": gloo failed: " + e.what());
  } catch (...) {
    return Status::error(PG_ERR_BACKEND, label + ": gloo failed with an unknown exception");
  }
}

void GlooGroup::fail(const std::shared_ptr<Work>& work, Status status) {
  if (status.code != PG_ERR_ABORTED) log(PG_LOG_ERROR, status.message);
  // Break first: whoever sees this work fail must find the group broken already.
  break_group(status.code, status.message);
  work->complete(status.code, std::move(status.message));
}

void GlooGroup::break_group(pg_status_t status, const std::string& cause) {
  std::deque<std::shared_ptr<Work>> queued;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_) return;
    broken_ = true;
    broken_cause_ = status == PG_ERR_ABORTED ? cause : "the group failed earlier: " + cause;
    queued.swap(queue_);
  }
  recv_order_.abort();
  shut_pairs();
  for (const auto& work : queued) {
    work->complete(PG_ERR_ABORTED, work->label() + ": not started: " + broken_cause_);
  }
}

void GlooGroup::shut_pairs() {
  if (!context_ || size_ == 1) return;
  ScopedSigpipeBlock no_sigpipe;  // a recv may write a notification to a dead peer
  char byte = 0;
  auto tripwire = context_->createUnboundBuffer(&byte, sizeof(byte));
  // A pair that already failed refuses the recv: try the next one. If every pair refuses,
  // every pair has failed already and there is nothing left to wake.
  for (int i = 1; i < size_; ++i) {
    try {
      tripwire->recv((rank_ + i) % size_, kTripwireSlot);
    } catch (const std::exception&) {
      continue;
    }
    try {
      tripwire->waitRecv(std::chrono::milliseconds(1));
    } catch (const std::exception&) {
      // The expected timeout: the transport has now failed every pair.
    }
    return;
  }
}

int GlooGroup::failed_peer(const std::string& gloo_message, std::vector<int>* down) const {
  if (!context_ || size_ == 1) return -1;
  ScopedSigpipeBlock no_sigpipe;
  char byte = 0;
  int match = -1;
  for (int i = 0; i < size_; ++i) {
    if (i == rank_) continue;
    auto probe = context_->createUnboundBuffer(&byte, sizeof(byte));
    try {
      probe->recv(i, kProbeSlot);  // a healthy pair accepts it (the group breaks next)
    } catch (const std::exception& e) {
      down->push_back(i);
      if (match < 0 && gloo_message == e.what()) match = i;
    }
  }
  return match;
}

void GlooGroup::log(int32_t level, const std::string& message) const {
  if (host_ != nullptr && host_->log != nullptr) {
    host_->log(host_->ctx, level, "gloo", message.c_str());
  }
}

}  // namespace procgroup::gloo_backend
