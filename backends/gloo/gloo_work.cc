// Works of the gloo backend (see gloo_work.h).
#include "gloo_work.h"

#include <algorithm>
#include <utility>

#include "gloo_ops.h"

namespace procgroup::gloo_backend {
namespace {

constexpr auto kWaitGrace = std::chrono::seconds(2);

}  // namespace

Work::Work(const pg_backend_op_t& op, const Plan& plan, uint32_t tag, Clock::time_point deadline)
    : op_(op), plan_(plan), tag_(tag), deadline_(deadline) {}

std::string Work::label() const { return op_label(op_); }

bool Work::complete(pg_status_t status, std::string message) {
  pg_backend_work_done_fn done_fn;
  void* done_user;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return false;
    done_ = true;
    status_ = status;
    message_ = std::move(message);
    done_fn = std::exchange(done_fn_, nullptr);
    done_user = done_user_;
  }
  cv_.notify_all();
  if (done_fn != nullptr) done_fn(done_user);  // the core tests the work: lock released
  return true;
}

bool Work::notify_on_complete(pg_backend_work_done_fn done, void* user) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (notice_asked_) return false;
    notice_asked_ = true;
    if (!done_) {
      done_fn_ = done;
      done_user_ = user;
      return true;
    }
  }
  done(user);
  return true;
}

pg_status_t Work::test(std::string* message) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (done_ && message != nullptr) *message = message_;
  return done_ ? status_ : PG_PENDING;
}

pg_status_t Work::wait(int64_t timeout_ms, std::string* message) const {
  std::unique_lock<std::mutex> lock(mu_);
  const auto until = timeout_ms < 0 ? std::max(deadline_, Clock::now()) + kWaitGrace
                                    : Clock::now() + std::chrono::milliseconds(timeout_ms);
  cv_.wait_until(lock, until, [&] { return done_; });
  if (done_ && message != nullptr) *message = message_;
  return done_ ? status_ : PG_PENDING;
}

}  // namespace procgroup::gloo_backend
