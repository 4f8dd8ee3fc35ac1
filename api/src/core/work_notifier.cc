#include "core/work_notifier.h"

#include <vector>

#include "core/work.h"

namespace procgroup::detail {
namespace {

// How long one wait for a work that cannot notify lasts before deadlines are checked again.
constexpr Millis kWaitSlice(50);

}  // namespace

WorkNotifier& WorkNotifier::instance() {
  static WorkNotifier* notifier = new WorkNotifier();  // leaked on purpose: see the header
  return *notifier;
}

WorkNotifier::WorkNotifier() : thread_([this] { run(); }) { thread_.detach(); }

void WorkNotifier::watch(std::shared_ptr<WorkState> work, bool needs_waiting) {
  std::lock_guard lock(mutex_);
  if (needs_waiting) {
    to_wait_.push_back(std::move(work));
    cv_.notify_one();
    return;
  }
  const Clock::time_point deadline = work->deadline().at();
  watched_.emplace(work.get(), std::move(work));
  if (deadline < wake_at_) cv_.notify_one();
}

void WorkNotifier::forget(const WorkState* work) {
  std::shared_ptr<WorkState> dropped;  // destroyed after the lock: it may release a backend work
  std::lock_guard lock(mutex_);
  auto it = watched_.find(work);
  if (it == watched_.end()) return;
  dropped = std::move(it->second);
  watched_.erase(it);
}

void WorkNotifier::expire_due(std::unique_lock<std::mutex>& lock) {
  std::vector<std::shared_ptr<WorkState>> due;
  for (const auto& [key, work] : watched_)
    if (work->deadline().expired()) due.push_back(work);
  if (due.empty()) return;
  lock.unlock();
  for (auto& work : due) (void)work->test();  // times it out; its callback forgets it
  due.clear();
  lock.lock();
}

void WorkNotifier::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (!to_wait_.empty()) {
      wake_at_ = Clock::time_point::min();
      std::shared_ptr<WorkState> work = to_wait_.front();
      lock.unlock();
      (void)work->wait(Deadline::after(kWaitSlice));  // on completion it fires the callback
      const bool done = work->done();
      lock.lock();
      if (done) to_wait_.pop_front();  // only this thread pops: still the front
      expire_due(lock);
      continue;
    }
    wake_at_ = Clock::time_point::max();
    for (const auto& [key, work] : watched_) wake_at_ = std::min(wake_at_, work->deadline().at());
    if (wake_at_ == Clock::time_point::max()) {
      cv_.wait(lock);
    } else {
      cv_.wait_until(lock, wake_at_);
    }
    expire_due(lock);
  }
}

}  // namespace procgroup::detail
