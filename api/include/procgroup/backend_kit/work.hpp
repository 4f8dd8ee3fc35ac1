// backend_kit/work.hpp — what a plugin's work needs to finish once and be waited for:
// kit::Completion (the outcome, waiting on it, and the core's completion notice),
// kit::wait_until (a condition variable's wait to a deadline that may be kNever),
// kit::deadline_after (now + ms, saturated) and its cheaper twin kit::lazy_deadline_after
// (from kit::coarse_now, a few ms late). A Completion has the test, wait and
// notify_on_complete a work needs (kit::make_ops), so a work that completes on some other
// thread (a worker, a peer's delivery) can be one, or derive from one to carry more:
//
//   using MyWork = kit::Completion;
//   work->complete(PG_OK);  // by whoever finishes it; only the first call counts
#ifndef PROCGROUP_BACKEND_KIT_WORK_HPP_
#define PROCGROUP_BACKEND_KIT_WORK_HPP_

#include <time.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>

#include "procgroup/backend_kit/status.hpp"
#include "procgroup/procgroup_backend.h"

namespace procgroup::kit {

using Clock = std::chrono::steady_clock;
inline constexpr Clock::time_point kNever = Clock::time_point::max();

namespace detail {
// from + ms (ms < 0: from), saturated: callers pass "forever" as huge values, which must not
// wrap around; ten years or more is kNever.
inline Clock::time_point saturated_after(Clock::time_point from, int64_t ms) {
  constexpr int64_t kMaxMs = int64_t{10} * 365 * 24 * 3600 * 1000;
  if (ms >= kMaxMs) return kNever;
  return from + std::chrono::milliseconds(ms < 0 ? 0 : ms);
}
}  // namespace detail

// now + ms (ms < 0: now), saturated at kNever (ten years or more).
inline Clock::time_point deadline_after(int64_t ms) {
  return detail::saturated_after(Clock::now(), ms);
}

// The steady clock as of its last tick (Linux's CLOCK_MONOTONIC_COARSE, 4 ms on most
// kernels) at a fraction of Clock::now()'s cost (on a VM ~10 against ~50 ns): never ahead
// of Clock::now(), behind it by up to a tick and the tick's own lateness (4.6 ms measured
// on a 4 ms-tick VM). Elsewhere, Clock::now() itself.
inline Clock::time_point coarse_now() {
#ifdef CLOCK_MONOTONIC_COARSE
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return Clock::time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
#else
  return Clock::now();
#endif
}

inline Clock::duration coarse_tick() {
#ifdef CLOCK_MONOTONIC_COARSE
  static const Clock::duration tick = [] {
    timespec res{};
    clock_getres(CLOCK_MONOTONIC_COARSE, &res);
    return Clock::duration(std::chrono::seconds(res.tv_sec) +
                           std::chrono::nanoseconds(res.tv_nsec));
  }();
  return tick;
#else
  return Clock::duration(0);
#endif
}

// deadline_after(ms) from coarse_now() plus two ticks: up to two ticks later than
// deadline_after, and earlier only if the kernel's tick runs more than a tick late. For an
// op's timeout, set on every operation's path.
inline Clock::time_point lazy_deadline_after(int64_t ms) {
  return detail::saturated_after(coarse_now() + 2 * coarse_tick(), ms);
}

// cv.wait_until(lock, until, pred), or for until == kNever an untimed cv.wait(lock, pred):
// no timed wait ever sees a time point at the very end of the clock. Returns pred().
template <class Pred>
bool wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                Clock::time_point until, Pred pred) {
  if (until != kNever) return cv.wait_until(lock, until, std::move(pred));
  cv.wait(lock, std::move(pred));
  return true;
}

// The outcome of one operation, set once, by any thread; safe to share between them.
class Completion {
 public:
  // Records the outcome and wakes the waiters, then calls the completion notice (outside
  // the lock: the core tests the work from it). Only the first call counts (an abort and a
  // late success may race); later ones change nothing and return false.
  bool complete(pg_status_t status, std::string message = {}) {
    pg_backend_work_done_fn done_fn = nullptr;
    void* done_user = nullptr;
    {
      std::lock_guard lock(mu_);
      if (status_ != PG_PENDING) return false;
      status_ = status;
      message_ = std::move(message);
      done_fn = std::exchange(done_fn_, nullptr);
      done_user = done_user_;
    }
    cv_.notify_all();
    if (done_fn != nullptr) done_fn(done_user);
    return true;
  }
  bool complete(Status outcome) { return complete(outcome.code, std::move(outcome.message)); }

  // PG_OK, PG_PENDING or the error, whose text goes to *message.
  pg_status_t test(std::string* message) const {
    std::lock_guard lock(mu_);
    return report_locked(message);
  }

  // test() once the work completes or `until` passes (kNever: no bound).
  pg_status_t wait_until(Clock::time_point until, std::string* message) const {
    std::unique_lock lock(mu_);
    kit::wait_until(cv_, lock, until, [this] { return status_ != PG_PENDING; });
    return report_locked(message);
  }

  // A work's wait entry: wait_until(deadline_after(timeout_ms)), or for timeout_ms < 0
  // wait_until(unbounded), which a plugin whose works all end by a deadline of their own
  // may pass (plus a grace) instead of waiting forever.
  pg_status_t wait(int64_t timeout_ms, std::string* message,
                   Clock::time_point unbounded = kNever) const {
    return wait_until(timeout_ms < 0 ? unbounded : deadline_after(timeout_ms), message);
  }

  // Calls done(user) once when the work completes, on the completing thread (here, now, if
  // it has already). false if a notice was asked for already.
  bool notify_on_complete(pg_backend_work_done_fn done, void* user) {
    {
      std::lock_guard lock(mu_);
      if (notice_asked_) return false;
      notice_asked_ = true;
      if (status_ == PG_PENDING) {
        done_fn_ = done;
        done_user_ = user;
        return true;
      }
    }
    done(user);
    return true;
  }

 private:
  pg_status_t report_locked(std::string* message) const {
    if (status_ != PG_OK && status_ != PG_PENDING && message != nullptr) *message = message_;
    return status_;
  }

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  pg_status_t status_ = PG_PENDING;
  std::string message_;
  pg_backend_work_done_fn done_fn_ = nullptr;
  void* done_user_ = nullptr;
  bool notice_asked_ = false;
};

}  // namespace procgroup::kit

#endif  // PROCGROUP_BACKEND_KIT_WORK_HPP_
