#include "core/fallback_runner.h"

namespace procgroup::detail {

void FallbackRunner::post(std::function<void()> task) {
  std::lock_guard lock(mutex_);
  queue_.push_back(std::move(task));
  unfinished_.fetch_add(1, std::memory_order_relaxed);
  if (!thread_.joinable() && !stopping_) thread_ = std::thread([this] { loop(); });
  cv_.notify_one();
}

bool FallbackRunner::busy() {
  // A task's effects happen before its decrement (release), so a caller that sees 0 also
  // sees everything the runner did.
  return unfinished_.load(std::memory_order_acquire) != 0;
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
  for (auto& task : rest) {
    task();
    unfinished_.fetch_sub(1, std::memory_order_release);
  }
}

void FallbackRunner::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping and drained
    auto task = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    task();
    unfinished_.fetch_sub(1, std::memory_order_release);
    lock.lock();
  }
}

}  // namespace procgroup::detail
