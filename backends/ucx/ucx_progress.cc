// Progress for the ucx backend: who polls the worker, when to spin and when to block
// (see the progress model in ucx_group.h).
//
// Exactly one thread at a time is "the poller" (poller_active_): a thread in work_wait
// when there is one, else the progress thread when operations are running unattended.
// Everything happens under mu_, except the blocking epoll_wait, which runs unlocked after
// ucp_worker_arm said there is nothing left to process.
#include <sched.h>

#include <algorithm>

#include "ucx_group.h"

namespace procgroup::ucx_backend {
namespace {

// The progress thread's sleep while the group is in use, and the longest when idle.
constexpr auto kActivePeriod = std::chrono::milliseconds(1);
constexpr auto kIdlePeriod = std::chrono::milliseconds(100);
constexpr auto kIdleAfter = std::chrono::milliseconds(100);
// Its longest sleep while callers keep waiting for themselves (progress_loop).
constexpr auto kDeferPeriod = std::chrono::milliseconds(16);
// How often the poller looks at deadlines and dead peers; the longest sleep.
constexpr auto kDeadlineCheck = std::chrono::milliseconds(1);
constexpr auto kMaxBlock = std::chrono::milliseconds(100);
// With sends outstanding: poll this long after the last event, then nap, doubling.
constexpr auto kSendingSpin = std::chrono::microseconds(1000);
constexpr auto kFirstNap = std::chrono::microseconds(50);
constexpr auto kLastNap = std::chrono::microseconds(1000);
constexpr auto kYieldAfter = std::chrono::microseconds(50);
// The adaptive spin never drops below this: a peer that answers within it keeps the fast
// path, and one that does not costs a few microseconds of spinning.
constexpr int64_t kMinSpinUs = 2;

}  // namespace

// ---- One round of progress --------------------------------------------------------------

bool UcxGroup::poll_once() {
  bool any = ucp_worker_progress(worker_.get()) != 0;
  if (shm_.arrival.op != nullptr && shm_.all_posted(shm_.arrival.seq)) {
    resume_later(shm_.arrival.op, shm_.arrival.handle);
    shm_.arrival = {};
  }
  if (!ready_.empty()) {
    any = true;
    run_ready();
  }
  if (control_arrived_) handle_control();
  if (!failed_peers_.empty()) handle_peer_failures();
  if (!finalize_.empty()) {
    any = true;
    finalizing_.swap(finalize_);
    for (Op* op : finalizing_) finalize(op);
    finalizing_.clear();
  }
  return any;
}

void UcxGroup::run_ready() {
  // Resumed coroutines post requests, and UCX may complete other requests inside those
  // calls: their coroutines land in ready_ again, for the next round.
  resuming_.swap(ready_);  // both keep their capacity: no allocation per operation
  for (auto& [op, handle] : resuming_) {
    handle.resume();
    settle(op);
  }
  resuming_.clear();
}

void UcxGroup::settle(Op* op) {
  if (!op->task_done && op->task.done()) {
    const Status& result = op->task.result();
    // Any failure of a started operation breaks the group (its peers may be stuck mid-way),
    // except a recv that got a message of another size: UCX consumed all of it and the
    // sender's send completed, so both ranks are still in step.
    const bool contained = op->desc.op == PG_OP_RECV && result.code == PG_ERR_MISMATCH;
    if (!result.ok() && !broken_ && !contained) {
      // Our failure may be the consequence of a peer's (it broke the group and left): its
      // notice, if already here, names the cause and wins.
      for (int i = 0; i < 16 && ucp_worker_progress(worker_.get()) != 0; ++i) {
      }
      if (control_arrived_) handle_control();
    }
    // Only now: requests of this op completed above must not queue it for finalize().
    op->task_done = true;
    if (!result.ok() && op->failure.ok()) {
      op->failure = Status::error(result.code, op_label(op->desc) + ": " + result.message);
    }
    if (!result.ok() && !broken_ && !contained) {
      break_group(result.code, op->failure.message, true);
    }
  }
  if (op->task_done && op->pending == 0 && !op->finished) finalize(op);
}

void UcxGroup::requests_done(Op* op) {
  if (op->task_done && !op->finished && !op->queued) {
    op->queued = true;
    finalize_.push_back(op);
  }
}

void UcxGroup::finalize(Op* op) {
  if (op->finished) return;
  op->finished = true;
  // settle() can finalize an op whose last request completed inside its own break_group
  // (forced endpoint close, cancelled receives), which already queued it: no dangling
  // pointer may stay behind in finalize_.
  if (op->queued) std::erase(finalize_, op);
  // Only an op whose task returned gets here, and settle() made a failed task's failure.
  op->work->complete(op->task.result().ok() ? Status{} : op->failure);
  list_remove(ops_, op);
  for (const ScratchLease& lease : op->leases) pool_.give(lease);
  delete op;
  if (sleeping_waiters_ > 0) waiters_cv_.notify_all();
}

// ---- Waiting ----------------------------------------------------------------------------

int64_t UcxGroup::block_us(Clock::time_point now, Clock::time_point until) const {
  auto limit = std::min(until, now + kMaxBlock);
  for (const Op* op = ops_; op != nullptr; op = op->next) limit = std::min(limit, op->deadline);
  const auto us = std::chrono::ceil<std::chrono::microseconds>(limit - now).count();
  return std::clamp<int64_t>(us, 0, std::chrono::microseconds(kMaxBlock).count());
}

bool UcxGroup::poll_until(std::unique_lock<std::mutex>& lock, const Work* work,
                          Clock::time_point until, bool spin, Clock::time_point* first_idle) {
  const auto spin_for = std::chrono::microseconds(spin ? spin_us_ : 0);
  bool blocked = false;
  // The clock is first read at the first idle round: an op that completes at once (a small
  // one, a peer already there) costs no read at all.
  Clock::time_point now{};
  Clock::time_point last_event{};
  // Only a waiter yields at every idle round, and only while a peer shares its CPU (two
  // ranks on one core: bound so, or placed so by the scheduler on a busy machine).
  bool cpu_shared = spin && shm_.peer_on_my_cpu();
  auto nap = kFirstNap;
  unsigned idle_rounds = 0;
  for (;;) {
    if (work != nullptr ? work->done() : ops_ == nullptr) return blocked;
    if (!spin && want_poll_.load(std::memory_order_relaxed)) return blocked;
    if (stopping_ && !spin) return blocked;
    if (poll_once()) {
      idle_rounds = 0;
      nap = kFirstNap;
      last_event = Clock::time_point{};  // refreshed below when idle again
      lock.unlock();                     // let issuing threads in between rounds
      lock.lock();
      continue;
    }
    if (cpu_shared) {
      // A peer last seen on our CPU cannot answer while we spin on it: let it run.
      lock.unlock();
      sched_yield();
      lock.lock();
    } else if (shm_.arrival.op != nullptr && shm_.await_briefly(shm_.arrival.seq)) {
      // A peer's slot signals nobody, and one look costs far less than a poll of UCX: look
      // a few times before polling again (the next poll_once resumes the op).
      continue;
    }
    // Reading the clock costs as much as an empty poll: only every 16 idle rounds.
    if (idle_rounds++ % 16 != 0) continue;
    now = Clock::now();
    if (last_event == Clock::time_point{}) last_event = now;
    if (spin) cpu_shared = shm_.peer_on_my_cpu();  // the scheduler may have moved either
    if (first_idle != nullptr && *first_idle == Clock::time_point{}) *first_idle = now;
    if (now >= next_deadline_check_) {
      next_deadline_check_ = now + kDeadlineCheck;
      check_local_peers(0);
      check_deadlines(now);
      continue;
    }
    if (now >= until) return blocked;
    const auto idle = now - last_event;
    // UCX may hold sends queued for room in a peer's shared-memory FIFO, and room freeing
    // up signals nobody: while sends are outstanding keep polling a while longer, then
    // nap briefly instead of sleeping until an event.
    // Peers' shared-memory slots (ucx_shm.h) signal nobody either.
    const bool sending = sends_outstanding_ > 0 || shm_.arrival.op != nullptr;
    if (idle < spin_for || (sending && idle < kSendingSpin)) {
      lock.unlock();
      // After a while, now and then let a peer that shares our core run (yielding at every
      // round would hand the core to unrelated work between every two fragments).
      if (idle > kYieldAfter && idle_rounds % 64 == 1) sched_yield();
      lock.lock();
      continue;
    }
    const ucs_status_t armed = ucp_worker_arm(worker_.get());
    if (armed == UCS_ERR_BUSY) continue;
    int64_t us = block_us(now, until);
    // Without a working event fd (a transport without wakeup support) only naps are safe.
    if (sending || armed != UCS_OK || !wakeup_) {
      us = std::min<int64_t>(us, std::chrono::microseconds(nap).count());
      nap = std::min(nap * 2, kLastNap);
    }
    if (!spin) thread_blocked_.store(true, std::memory_order_relaxed);
    std::vector<int> exited;  // filled unlocked, handed over below
    lock.unlock();
    if (us > 0) waker_.wait(us, &exited);
    blocked = true;
    lock.lock();
    thread_blocked_.store(false, std::memory_order_relaxed);
    if (!exited.empty()) {
      exited_.insert(exited_.end(), exited.begin(), exited.end());
      handle_exits();
    }
    if (!sending && armed == UCS_OK && wakeup_) last_event = Clock::now();
    idle_rounds = 0;
  }
}

void UcxGroup::wait_for(const Work& work, Clock::time_point until) {
  waiting_.fetch_add(1, std::memory_order_relaxed);
  std::unique_lock<std::mutex> lock(mu_);
  while (!work.done() && !shut_down_) {
    if (!poller_active_) {
      poller_active_ = true;
      Clock::time_point started{};  // when it first found nothing to do: it blocks only later
      const bool blocked = poll_until(lock, &work, until, true, &started);
      poller_active_ = false;
      // Spinning pays when the answer comes within the spin limit: a wait that blocked
      // although it took less than the limit restores the full spin; a longer one (a slow
      // peer) halves it, so waiting on slow peers does not keep a core busy.
      if (work.done() && blocked && started != Clock::time_point{}) {
        const auto took =
            std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started);
        spin_us_ = took.count() < tuning_.spin_us ? tuning_.spin_us
                                                  : std::max<int64_t>(kMinSpinUs, spin_us_ / 2);
      }
      // Hand what is left to the progress thread, and the poller role to other waiters.
      if (ops_ != nullptr) kick_thread(Kick::kAlways);
      if (sleeping_waiters_ > 0) waiters_cv_.notify_all();
    } else {
      if (thread_polls_) {
        // The progress thread is polling: take over, a waiter polls with less latency.
        want_poll_.store(true, std::memory_order_relaxed);
        if (thread_blocked_.load(std::memory_order_relaxed)) waker_.wake();
      }
      ++sleeping_waiters_;
      waiters_cv_.wait_until(lock, std::min(until, Clock::now() + kDeadlineCheck * 10));
      --sleeping_waiters_;
    }
    if (work.done() || Clock::now() >= until) break;
  }
  last_wait_end_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  waiting_.fetch_sub(1, std::memory_order_relaxed);
}

void UcxGroup::poll_for_test() {
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock() || poller_active_ || shut_down_) return;
  poll_once();
}

// ---- The progress thread ------------------------------------------------------------------

void UcxGroup::kick_thread(Kick why) {
  if (why == Kick::kIfIdle && !thread_idle_.load()) return;  // it looks within a period anyway
  std::lock_guard<std::mutex> sleep(thread_mu_);
  if (why == Kick::kStop) thread_stop_ = true;
  thread_kicked_ = true;
  thread_cv_.notify_one();
}

// The thread's sleep grows while callers keep waiting: each of its wakes took a core from a
// bound rank for long enough to cost blocking loops of 1-8 MiB allreduces 5-10 % of their
// time on this project's 2-core VM (one wake per ms). A caller that leaves work_wait with
// operations still running kicks it awake.
void UcxGroup::progress_loop() {
  auto period = kActivePeriod;
  bool idle = false;  // nothing issued for kIdleAfter: a submission kicks the thread
  uint64_t seen = 0;  // submits_ when it judged the group idle
  for (;;) {
    bool kicked = false;
    {
      std::unique_lock<std::mutex> sleep(thread_mu_);
      thread_idle_.store(idle);
      // A submission between that judgement and the store above found no idle thread to
      // kick: its count shows (both sides are sequentially consistent, so one sees the other).
      const auto submitted = [&] { return idle && submits_.load() != seen; };
      thread_cv_.wait_for(sleep, period,
                          [&] { return thread_kicked_ || thread_stop_ || submitted(); });
      if (thread_stop_) break;
      kicked = std::exchange(thread_kicked_, false) || submitted();
    }
    // A caller waiting now, or one that left work_wait within the last active period,
    // polls for itself and will most likely wait again at once: leave it the mutex.
    const auto now = Clock::now();
    const Clock::duration since_wait(now.time_since_epoch().count() -
                                     last_wait_end_.load(std::memory_order_relaxed));
    if (!kicked && (waiting_.load(std::memory_order_relaxed) > 0 || since_wait < kActivePeriod)) {
      period = std::min(period * 2, kDeferPeriod);
      idle = false;
      continue;
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (stopping_) break;
    idle = now - last_activity_ >= kIdleAfter;
    if (idle) seen = submits_.load();
    period = idle ? std::min(period * 2, kIdlePeriod) : kActivePeriod;
    if (poller_active_) continue;
    if (ops_ == nullptr) {
      poll_once();  // UCX's own housekeeping: wireup replies, keepalive, goodbyes
      check_local_peers(0);
      continue;
    }
    // Operations nobody waits on: poll them to completion, blocking on the event fd
    // between events, until a waiter asks for the poller role.
    poller_active_ = true;
    thread_polls_ = true;
    poll_until(lock, nullptr, Clock::time_point::max(), false);
    thread_polls_ = false;
    poller_active_ = false;
    want_poll_.store(false, std::memory_order_relaxed);
    if (sleeping_waiters_ > 0) waiters_cv_.notify_all();
    period = kActivePeriod;
  }
}

}  // namespace procgroup::ucx_backend
