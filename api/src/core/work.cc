#include "core/work.h"

#include "common/dtype.h"
#include "common/log.h"
#include "core/group.h"
#include "core/plugin_call.h"
#include "core/work_notifier.h"

namespace procgroup::detail {
namespace {

// The work whose backend this thread is polling (under that work's lock): a backend that
// reports completion from inside work_test/work_wait calls backend_done here, re-entrantly.
thread_local const WorkState* t_polling = nullptr;

}  // namespace

std::string OpLabel::to_string() const {
  if (seq == 0) return fmt::format("{} ({})", op_name(args.op), describe(args));
  return fmt::format("{} #{} ({})", op_name(args.op), seq, describe(args));
}

WorkState::WorkState(std::weak_ptr<GroupState> group, OpLabel label, Deadline deadline,
                     uint64_t trace_id, OpTrace trace)
    : group_(std::move(group)),
      label_(label),
      deadline_(deadline),
      trace_id_(trace_id),
      trace_(trace) {}

WorkState::~WorkState() {
  if (backend_work_ != nullptr) ops_->work_release(backend_work_);
}

void WorkState::adopt_backend_work(const pg_backend_ops_t* ops, pg_backend_on_complete_fn notify,
                                   std::string backend, pg_backend_work_t work,
                                   std::function<Status()> on_success) {
  bool arm;
  {
    std::lock_guard lock(mutex_);
    ops_ = ops;
    notify_ = notify;
    backend_ = std::move(backend);
    backend_work_ = work;
    on_success_ = std::move(on_success);
    cv_.notify_all();  // a waiter parked before the runner submitted now polls the backend
    if (!callback_ || done_) return;
    arm = notify_armed_ = notify_ != nullptr;
  }
  // A callback was asked for before the runner submitted this: now someone must complete it.
  if (arm) {
    arm_backend_notify();
  } else {
    WorkNotifier::instance().watch(shared_from_this(), /*needs_waiting=*/true);
  }
}

void WorkState::complete(Status status) {
  {
    std::lock_guard lock(mutex_);
    if (!done_) finish_locked(std::move(status));
  }
  fire_callback();
}

Status WorkState::on_complete(Callback callback) {
  bool arm = false, needs_waiting = false, watch = false;
  {
    std::lock_guard lock(mutex_);
    if (callback_ || callback_due_ || callback_fired_) {
      return make_error(PG_ERR_INVALID_ARGUMENT, "{} has a completion callback already",
                        label_.to_string());
    }
    callback_ = std::move(callback);
    if (done_) {
      callback_due_ = true;
    } else {
      watch = watched_ = true;
      // Without a backend work yet, the runner completes (or later submits) it.
      arm = notify_armed_ = backend_work_ != nullptr && notify_ != nullptr;
      needs_waiting = backend_work_ != nullptr && notify_ == nullptr;
    }
  }
  if (!watch) {
    fire_callback();
    return ok_status();
  }
  // The deadline is enforced there in every case; a backend that cannot notify is waited for.
  WorkNotifier::instance().watch(shared_from_this(), needs_waiting);
  if (arm) arm_backend_notify();
  return ok_status();
}

void WorkState::fire_callback() {
  Callback callback;
  Status status;
  bool watched;
  if (!callback_due_.load(std::memory_order_acquire)) return;
  {
    std::lock_guard lock(mutex_);
    if (!callback_due_.exchange(false)) return;  // another thread fired it
    callback_fired_ = true;
    callback = std::move(callback_);
    callback_ = nullptr;
    status = status_;
    watched = watched_;
  }
  callback(status);
  if (watched) WorkNotifier::instance().forget(this);  // may drop the last reference
}

void WorkState::arm_backend_notify() {
  // The backend holds a reference until it calls back, so this work (and its backend
  // work, released only then) outlives every completion path.
  auto* ref = new std::shared_ptr<WorkState>(shared_from_this());
  Status armed = call_plugin(backend_, "work_on_complete",
                             [&] { return notify_(backend_work_, &WorkState::backend_done, ref); });
  if (armed.ok()) return;
  delete ref;
  log(kLogWarn, "core", "{}: {}; waiting for it on a thread instead", label_.to_string(),
      armed.message());
  {
    std::lock_guard lock(mutex_);
    notify_armed_ = false;
    if (done_) {  // finished meanwhile, keeping the backend work for the notice: free it
      release_backend_work_locked();
      return;
    }
  }
  WorkNotifier::instance().watch(shared_from_this(), /*needs_waiting=*/true);
}

void WorkState::backend_done(void* self_ref) {
  std::unique_ptr<std::shared_ptr<WorkState>> ref(
      static_cast<std::shared_ptr<WorkState>*>(self_ref));
  WorkState& self = **ref;
  if (t_polling == &self) {
    // Called from inside our own poll of the backend, which holds the lock: the poller
    // sees the completion and releases the backend work.
    self.notify_fired_ = true;
    return;
  }
  {
    std::lock_guard lock(self.mutex_);
    self.notify_fired_ = true;
    // Its status is the work's own now (done_, status_): nothing to pass on here.
    if (!self.done_) (void)self.poll_backend_locked(Millis(0));
    if (self.done_) self.release_backend_work_locked();
  }
  self.fire_callback();
}

void WorkState::release_backend_work_locked() {
  if (backend_work_ != nullptr) ops_->work_release(backend_work_);
  backend_work_ = nullptr;
}

bool WorkState::done() { return done_.load(std::memory_order_acquire); }

const Status& WorkState::finish_locked(Status status) {
  if (status.ok() && on_success_) status = on_success_();
  on_success_ = nullptr;
  // An armed backend still calls back with a pointer to its work: released then.
  if (!notify_armed_ || notify_fired_) release_backend_work_locked();
  // A fatal failure of any work fails its group: later calls fail fast (DESIGN.md §6).
  if (auto group = group_.lock()) group->end_op(label_, trace_id_, trace_, status);
  status_ = std::move(status);
  done_.store(true, std::memory_order_release);
  callback_due_.store(static_cast<bool>(callback_), std::memory_order_release);
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
  const WorkState* outer = t_polling;
  t_polling = this;
  Status status = poll_backend_work(backend_, *ops_, backend_work_, wait_for);
  t_polling = outer;
  if (status.code() == PG_PENDING) return status;
  if (!status.ok()) status = status.with_context(label_.to_string());
  return finish_locked(status);
}

Status WorkState::test() {
  Status status = test_unfired();
  fire_callback();
  return status;
}

Status WorkState::wait(Deadline wait_deadline) {
  Status status = wait_unfired(wait_deadline);
  fire_callback();
  return status;
}

Status WorkState::test_unfired() {
  // Finished: status_ was written before done_'s release and never changes again. Read
  // before the lock, which another thread may hold briefly even now (the runner checking
  // earlier works, a notice from the backend): a finished work is never PG_PENDING.
  if (done_.load(std::memory_order_acquire)) return status_;
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

Status WorkState::wait_unfired(Deadline wait_deadline) {
  std::unique_lock lock(mutex_);
  Deadline until = wait_deadline.min(deadline_);
  while (!done_) {
    if (backend_work_ != nullptr) {
      // Poll in slices so an abort from another thread (which the backend turns into
      // a prompt failure) and the deadline are both noticed.
      Status status = poll_backend_locked(until.slice(Millis(100)));
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
    {
      std::lock_guard lock(mutex_);
      if (!done_) timeout_locked();
    }
    fire_callback();
  }
}

}  // namespace procgroup::detail
