// A work: the completion record of one operation, shared between the caller's handle and
// whoever finishes it (a rank's worker thread, or the peer thread that matches a recv).
// It is reference-counted because the caller may release its handle while the operation
// is still pending; the last holder frees it. It holds no pointer into the group, so a
// completed work can be tested and released after the group is gone.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <utility>

#include "procgroup/procgroup_backend_kit.hpp"

namespace procgroup::loopback {

using Clock = std::chrono::steady_clock;

inline constexpr Clock::time_point kNever = Clock::time_point::max();

// now + ms, saturated: callers pass "forever" as huge values, which must not wrap around.
inline Clock::time_point deadline_after(int64_t ms) {
  constexpr int64_t kMaxMs = int64_t{10} * 365 * 24 * 3600 * 1000;  // ten years
  if (ms >= kMaxMs) return kNever;
  return Clock::now() + std::chrono::milliseconds(ms < 0 ? 0 : ms);
}

using kit::Status;

class Work {
 public:
  Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  void ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  // Records the result; only the first call counts (abort and a late success may race).
  void complete(pg_status_t status, std::string message = {}) {
    {
      std::lock_guard lock(mu_);
      if (status_ != PG_PENDING) return;
      status_ = status;
      message_ = std::move(message);
    }
    cv_.notify_all();
  }
  void complete(Status outcome) { complete(outcome.code, std::move(outcome.message)); }

  // PG_OK, PG_PENDING or the error, whose text goes to *message.
  pg_status_t test(std::string* message) {
    std::unique_lock lock(mu_);
    return report_locked(message);
  }

  // timeout_ms < 0 waits for completion, which every operation reaches by its own deadline.
  pg_status_t wait(int64_t timeout_ms, std::string* message) {
    std::unique_lock lock(mu_);
    auto done = [this] { return status_ != PG_PENDING; };
    const Clock::time_point deadline = deadline_after(timeout_ms);
    if (timeout_ms < 0 || deadline == kNever) {
      cv_.wait(lock, done);
    } else {
      cv_.wait_until(lock, deadline, done);
    }
    return report_locked(message);
  }

 private:
  ~Work() = default;

  pg_status_t report_locked(std::string* message) {
    if (status_ != PG_OK && status_ != PG_PENDING) *message = message_;
    return status_;
  }

  std::atomic<int> refs_{1};
  std::mutex mu_;
  std::condition_variable cv_;
  pg_status_t status_ = PG_PENDING;
  std::string message_;
};

// An owning reference to a Work (one count), for the worker queue and p2p tables.
class WorkRef {
 public:
  WorkRef() = default;
  explicit WorkRef(Work* adopt) : work_(adopt) {}
  WorkRef(const WorkRef& other) : work_(other.work_) {
    if (work_) work_->ref();
  }
  WorkRef(WorkRef&& other) noexcept : work_(std::exchange(other.work_, nullptr)) {}
  WorkRef& operator=(WorkRef other) noexcept {
    std::swap(work_, other.work_);
    return *this;
  }
  ~WorkRef() {
    if (work_) work_->unref();
  }
  Work* operator->() const { return work_; }
  Work* get() const { return work_; }
 private:
  Work* work_ = nullptr;
};

}  // namespace procgroup::loopback
