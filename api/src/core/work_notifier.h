// Completion callbacks (pg_work_on_complete) for works nobody waits for. A backend that has
// work_on_complete completes such a work itself, on its own thread, so the callback costs no
// extra thread wake-up; this process-wide thread then only enforces the work's deadline,
// sleeping until the earliest one. For backends without it, it waits for the works, in
// the order they were handed over.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "common/deadline.h"

namespace procgroup::detail {

class WorkState;

class WorkNotifier {
 public:
  // Started at first use and never destroyed: works may complete during static teardown.
  static WorkNotifier& instance();

  // needs_waiting: nobody else completes the work (its backend cannot notify); else it is
  // watched only until its deadline, when a test() times it out (and fires its callback).
  void watch(std::shared_ptr<WorkState> work, bool needs_waiting);
  // The work has fired its callback: stop watching it.
  void forget(const WorkState* work);

 private:
  WorkNotifier();
  void run();
  // Tests every watched work whose deadline has passed (outside the lock).
  void expire_due(std::unique_lock<std::mutex>& lock);

  std::mutex mutex_;
  std::condition_variable cv_;
  std::unordered_map<const WorkState*, std::shared_ptr<WorkState>> watched_;
  std::deque<std::shared_ptr<WorkState>> to_wait_;
  // When the thread wakes next on its own; watch() wakes it only for an earlier deadline.
  // time_point::min() while it is busy waiting for works (it then checks every slice).
  Clock::time_point wake_at_ = Clock::time_point::max();
  std::thread thread_;
};

}  // namespace procgroup::detail
