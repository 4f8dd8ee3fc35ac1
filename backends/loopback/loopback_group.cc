// The shared group's failure state, and each rank's worker that runs collectives in issue
// order (the protocol is described in loopback_group.h). Rendezvous: loopback_rendezvous.cc.
#include "loopback_group.h"

#include <algorithm>
#include <cstring>

namespace procgroup::loopback {

// ---- SharedGroup -------------------------------------------------------------------

void SharedGroup::fail_locked(pg_status_t status, std::string message, uint64_t index) {
  if (failed) return;
  failed = true;
  fail_status = status;
  fail_message = std::move(message);
  fail_index = index;
  // Queued collectives were never posted, so no peer reads their buffers: fail them now.
  for (Slot& slot : slots) {
    for (Task& task : slot.queue) task.work->complete(failure_for(0));
  }
  for (auto& [key, pending] : recvs) {
    for (PendingRecv& recv : pending) recv.work->complete(failure_for(0));
  }
  recvs.clear();
  cv.notify_all();
}

Status SharedGroup::failure_for(uint64_t index) const {
  if (fail_status == PG_ERR_TIMEOUT && index != 0 && index == fail_index) {
    return {PG_ERR_TIMEOUT, fail_message};
  }
  if (fail_status == PG_ERR_ABORTED) return {PG_ERR_ABORTED, fail_message};
  return {PG_ERR_ABORTED,
          "loopback group '" + group_id + "' is aborted after an earlier failure: " + fail_message};
}

// ---- RankGroup: lifetime -----------------------------------------------------------

void RankGroup::shutdown() {
  SharedGroup& g = *shared_;
  {
    std::lock_guard lock(g.mu);
    g.slots[rank_].stopping = true;
    g.cv.notify_all();
  }
  if (worker_.joinable()) worker_.join();
  {
    std::unique_lock lock(g.mu);
    // A peer may be copying into one of our recv buffers; the user may free them once we
    // return, so wait for those copies and fail the recvs nobody matched.
    g.cv.wait(lock, [&] { return g.slots[rank_].deliveries == 0; });
    const auto mine = g.recvs.lower_bound(P2pKey{rank_, std::numeric_limits<int>::min(), 0});
    auto it = mine;
    for (; it != g.recvs.end() && it->first.dst == rank_; ++it) {
      for (PendingRecv& recv : it->second) {
        recv.work->complete(PG_ERR_ABORTED, "recv from rank " + std::to_string(it->first.src) +
                                                " (op #" + std::to_string(recv.seq) +
                                                ") was not matched before the group was destroyed");
      }
    }
    g.recvs.erase(mine, it);
  }
  leave();
}

void RankGroup::abort() {
  SharedGroup& g = *shared_;
  std::lock_guard lock(g.mu);
  g.fail_locked(PG_ERR_ABORTED,
                "loopback group '" + g.group_id + "' was aborted by rank " + std::to_string(rank_),
                0);
}

// ---- RankGroup: collectives ----------------------------------------------------------

Status RankGroup::submit(const pg_backend_op_t& op, WorkRef* out) {
  kit::Plan plan;  // 8 below: the largest element, in bytes
  PG_KIT_TRY(kit::plan_cpu_op(op, rank_, shared_->size, "loopback", 8, &plan));
  *out = std::make_shared<Work>();
  switch (op.op) {
    case PG_OP_SEND: submit_send(op, plan, *out); break;
    case PG_OP_RECV: submit_recv(op, plan, *out); break;
    default: submit_collective(op, plan, *out);
  }
  return {};
}

void RankGroup::submit_collective(const pg_backend_op_t& op, const kit::Plan& plan,
                                  const WorkRef& work) {
  Task task{work, collective_desc(op, plan), deadline_after(timeout_of(op))};
  SharedGroup& g = *shared_;
  std::lock_guard lock(g.mu);
  task.index = ++g.slots[rank_].issued;
  if (g.failed) {
    work->complete(g.failure_for(0));
  } else {
    g.slots[rank_].queue.push_back(task);
    g.cv.notify_all();
  }
}

template <class Pred>
bool RankGroup::wait_locked(std::unique_lock<std::mutex>& lock, Clock::time_point deadline,
                            Pred pred) {
  for (;;) {
    Clock::time_point next_recv = sweep_recvs_locked();
    if (pred()) return true;
    if (deadline != kNever && Clock::now() >= deadline) return false;
    Clock::time_point wake = std::min(deadline, next_recv);
    if (wake == kNever) {
      shared_->cv.wait(lock);
    } else {
      shared_->cv.wait_until(lock, wake);
    }
  }
}

void RankGroup::worker_main() {
  SharedGroup& g = *shared_;
  Slot& me = g.slots[rank_];
  std::unique_lock lock(g.mu);
  for (;;) {
    wait_locked(lock, kNever, [&] { return me.stopping || !me.queue.empty(); });
    if (me.queue.empty()) break;  // stopping, and everything issued has run
    Task task = std::move(me.queue.front());
    me.queue.pop_front();
    try {
      run_task(lock, task);
    } catch (...) {
      // Only allocating a message can throw here. Peers may have seen this collective
      // posted, so fail the group (no new readers) and let current readers finish before
      // the work completes and its buffers may be freed.
      if (!lock.owns_lock()) lock.lock();
      if (!g.failed) {
        g.failed = true;
        g.fail_status = PG_ERR_INTERNAL;
      }
      const uint64_t k = task.index;
      if (me.committed == k) me.finished = k;
      g.cv.notify_all();
      g.cv.wait(lock, [&] {
        return std::all_of(g.slots.begin(), g.slots.end(),
                           [&](const Slot& s) { return s.committed != k || s.finished >= k; });
      });
      task.work->complete(PG_ERR_INTERNAL, "loopback: unexpected failure in the worker");
    }
  }
}

void RankGroup::run_task(std::unique_lock<std::mutex>& lock, Task& task) {
  SharedGroup& g = *shared_;
  Slot& me = g.slots[rank_];
  const uint64_t k = task.index;
  if (g.failed) {
    task.work->complete(g.failure_for(0));
    return;
  }
  // Allocated before posting: after posting, nothing may fail before committing.
  std::vector<OpDesc> all(g.size);
  std::vector<std::byte> temp;
  me.desc = task.desc;
  me.posted = k;
  g.cv.notify_all();
  auto every = [&](auto pred) { return std::all_of(g.slots.begin(), g.slots.end(), pred); };
  auto readers_done = [&] {
    return every([&](const Slot& s) { return s.committed != k || s.finished >= k; });
  };
  bool arrived = wait_locked(lock, task.deadline, [&] {
    return g.failed || every([&](const Slot& s) { return s.posted >= k; });
  });
  if (!arrived) {
    g.fail_locked(PG_ERR_TIMEOUT,
                  describe(task.desc) + " as op #" + std::to_string(task.desc.seq) +
                      " timed out on rank " + std::to_string(rank_) + " in loopback group '" +
                      g.group_id + "'; not heard from rank(s) " +
                      rank_list(g.size, [&](int r) { return g.slots[r].posted < k; }),
                  k);
  }
  if (g.failed) {
    wait_locked(lock, kNever, readers_done);
    task.work->complete(g.failure_for(k));
    return;
  }
  for (int r = 0; r < g.size; ++r) all[r] = g.slots[r].desc;
  me.committed = k;
  lock.unlock();
  Status result = check_agreement(all);
  if (result.ok()) result = compute_collective(host_, rank_, all, &temp);
  lock.lock();
  me.finished = k;
  g.cv.notify_all();
  auto all_finished = [&] { return every([&](const Slot& s) { return s.finished >= k; }); };
  wait_locked(lock, kNever, [&] { return all_finished() || (g.failed && readers_done()); });
  if (!all_finished()) {
    task.work->complete(g.failure_for(k));
    return;
  }
  lock.unlock();
  if (result.ok() && !temp.empty()) std::memcpy(task.desc.plan.out, temp.data(), temp.size());
  task.work->complete(std::move(result));
  lock.lock();
}

}  // namespace procgroup::loopback
