// A work: the completion record of one operation, shared between the caller's handle and
// whoever finishes it (a rank's worker thread, or the peer thread that matches a recv).
// It is reference-counted because the caller may release its handle while the operation
// is still pending; the last holder frees it. It holds no pointer into the group, so a
// completed work can be tested and released after the group is gone.
#pragma once

#include <atomic>
#include <string>
#include <utility>

#include "procgroup/procgroup_backend_kit.hpp"

namespace procgroup::loopback {

using kit::Clock;
using kit::deadline_after;  // now + ms, saturated at kNever
using kit::kNever;
using kit::Status;

// complete(status, message) (only the first call counts: abort and a late success may
// race) and test() are kit::Completion's.
class Work : public kit::Completion {
 public:
  Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  void ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  // timeout_ms < 0 waits for completion, which every operation reaches by its own deadline.
  pg_status_t wait(int64_t timeout_ms, std::string* message) const {
    return wait_until(timeout_ms < 0 ? kNever : deadline_after(timeout_ms), message);
  }

 private:
  ~Work() = default;

  std::atomic<int> refs_{1};
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
