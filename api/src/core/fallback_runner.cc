#include "core/fallback_runner.h"

namespace procgroup::detail {

void FallbackRunner::post(std::function<void()> task) {
  std::lock_guard lock(mutex_);
  queue_.push_back(std::move(task));
  if (!thread_.joinable() && !stopping_) thread_ = std::thread([this] { loop(); });
  cv_.notify_one();
}

bool FallbackRunner::busy() {
  std::lock_guard lock(mutex_);
  return running_task_ || !queue_.empty();
}

void FallbackRunner::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    cv_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
  // Tasks posted after the thread ended (or when none was started) still run, so
  // their works complete rather than hang.
  std::deque<std::function<void()>> rest;
  {
    std::lock_guard lock(mutex_);
    rest.swap(queue_);
  }
  for (auto& task : rest) task();
}

void FallbackRunner::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping and drained
    auto task = std::move(queue_.front());
    queue_.pop_front();
    running_task_ = true;
    lock.unlock();
    task();
    lock.lock();
    running_task_ = false;
  }
}

}  // namespace procgroup::detail
