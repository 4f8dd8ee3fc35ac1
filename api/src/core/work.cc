#include "core/work.h"

#include "common/dtype.h"
#include "core/group.h"
#include "core/plugin_call.h"

namespace procgroup::detail {

std::string OpLabel::to_string() const {
  if (seq == 0) return fmt::format("{} ({})", op_name(args.op), describe(args));
  return fmt::format("{} #{} ({})", op_name(args.op), seq, describe(args));
}

WorkState::WorkState(std::weak_ptr<GroupState> group, OpLabel label, Deadline deadline,
                     uint64_t trace_id, OpTrace trace)
    : group_(std::move(group)),
      label_(std::move(label)),
      deadline_(deadline),
      trace_id_(trace_id),
      trace_(trace) {}

WorkState::~WorkState() {
  if (backend_work_ != nullptr) ops_->work_release(backend_work_);
}

void WorkState::adopt_backend_work(const pg_backend_ops_t* ops, std::string backend,
                                   pg_backend_work_t work, std::function<Status()> on_success) {
  std::lock_guard lock(mutex_);
  ops_ = ops;
  backend_ = std::move(backend);
  backend_work_ = work;
  on_success_ = std::move(on_success);
  cv_.notify_all();  // a waiter parked before the runner submitted now polls the backend
}

void WorkState::complete(Status status) {
  std::lock_guard lock(mutex_);
  if (!done_) finish_locked(std::move(status));
}

bool WorkState::done() {
  std::lock_guard lock(mutex_);
  return done_;
}

const Status& WorkState::finish_locked(Status status) {
  if (status.ok() && on_success_) status = on_success_();
  on_success_ = nullptr;
  if (backend_work_ != nullptr) {
    ops_->work_release(backend_work_);
    backend_work_ = nullptr;
  }
  if (auto group = group_.lock()) {
    // A fatal failure of any work fails its group: later calls fail fast (DESIGN.md §6).
    // Before the recorder closes this entry, so a hang report shows it still running.
    if (!status.ok()) status = group->mark_failed(status);
    if (trace_id_ != 0) group->recorder().finish(trace_id_, status.code());
    if (trace_.on()) trace_op_ended(group->timeline(), trace_, label_, group->id(), status);
  }
  done_ = true;
  status_ = std::move(status);
  cv_.notify_all();
  return status_;
}

const Status& WorkState::timeout_locked() {
  auto group = group_.lock();
  return finish_locked(group ? group->describe_timeout(label_)
                             : make_error(PG_ERR_TIMEOUT,
                                          "{} did not complete within the group timeout",
                                          label_.to_string()));
}

// One backend poll (wait_for 0: test). Returns PG_PENDING while running.
Status WorkState::poll_backend_locked(Millis wait_for) {
  Status status = call_plugin(backend_, "work_wait", [&] {
    return wait_for.count() == 0 ? ops_->work_test(backend_work_)
                                 : ops_->work_wait(backend_work_, wait_for.count());
  });
  if (status.code() == PG_PENDING) return status;
  if (!status.ok()) status = status.with_context(label_.to_string());
  return finish_locked(status);
}

Status WorkState::test() {
  // A thread inside wait() holds the lock while it polls the backend (up to 100 ms a
  // slice): the work is still running then, and that waiter will finish it. test() must
  // not queue behind it (a torch future's completer thread waits while the user polls).
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return Status(PG_PENDING, "");
  if (done_) return status_;
  if (backend_work_ != nullptr) {
    Status status = poll_backend_locked(Millis(0));
    if (status.code() != PG_PENDING) return status;
  }
  if (deadline_.expired()) return timeout_locked();
  return Status(PG_PENDING, "");
}

Status WorkState::wait(Deadline wait_deadline) {
  std::unique_lock lock(mutex_);
  Deadline until = wait_deadline.min(deadline_);
  while (!done_) {
    if (backend_work_ != nullptr) {
      // Poll in slices so an abort from another thread (which the backend turns into
      // a prompt failure) and the deadline are both noticed.
      Status status = poll_backend_locked(until.remaining(Millis(100)));
      if (status.code() != PG_PENDING) return status;
    } else {
      cv_.wait_until(lock, until.at() == Clock::time_point::max()
                               ? Clock::now() + std::chrono::hours(24)
                               : until.at());
    }
    if (done_) break;
    if (deadline_.expired()) return timeout_locked();
    if (wait_deadline.expired()) return Status(PG_PENDING, "");
  }
  return status_;
}

void WorkState::finish_before_group_destroy() {
  Status status = wait(deadline_);
  if (status.code() == PG_PENDING) {
    std::lock_guard lock(mutex_);
    if (!done_) timeout_locked();
  }
}

}  // namespace procgroup::detail
