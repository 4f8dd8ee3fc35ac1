// A work: the handle behind pg_work_t. It completes exactly once, either through a
// backend work (native operations) or from the core's fallback runner (emulated ones).
// The group timeout is enforced here: a wait or test that finds the work still pending
// past its deadline aborts the group and fails the work with PG_ERR_TIMEOUT.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "common/deadline.h"
#include "common/status.h"
#include "core/op_args.h"
#include "core/timeline.h"
#include "procgroup/procgroup_backend.h"

namespace procgroup::detail {

class GroupState;

// What a work is doing, for messages ("allreduce #12 (f32 x 1024, sum)"). Kept as data and
// formatted only when a message needs it: issuing an operation must stay cheap.
struct OpLabel {
  OpArgs args;
  uint64_t seq = 0;
  std::string to_string() const;
};

class WorkState : public std::enable_shared_from_this<WorkState> {
 public:
  // Called once with the final status (pg_work_on_complete), outside the work's lock.
  using Callback = std::function<void(const Status&)>;

  // trace_id: this operation's entry in the group's flight recorder (0: none); trace: its
  // place on the timeline and in the debug log (timeline.h).
  WorkState(std::weak_ptr<GroupState> group, OpLabel label, Deadline deadline,
            uint64_t trace_id = 0, OpTrace trace = {});
  ~WorkState();
  WorkState(const WorkState&) = delete;
  WorkState& operator=(const WorkState&) = delete;

  // Native: the work completes when the backend's does; then on_success runs once
  // (e.g. AVG's final scaling when the backend only sums).
  // notify: the plugin's optional work_on_complete entry (NULL: it has none).
  void adopt_backend_work(const pg_backend_ops_t* ops, pg_backend_on_complete_fn notify,
                          std::string backend, pg_backend_work_t work,
                          std::function<Status()> on_success);
  // Emulated: the runner calls this when done.
  void complete(Status status);

  // PG_OK, PG_PENDING or the failure (Status code), never blocking long.
  Status test();
  // Waits until completion or until wait_deadline; PG_PENDING if that passed first.
  Status wait(Deadline wait_deadline);
  // For group destroy: wait up to the work's own deadline and drop the backend work.
  void finish_before_group_destroy();

  // Runs callback once when the work completes: right here if it already has, else on the
  // thread that completes it (the backend's, through its work_on_complete; the runner's;
  // a waiter's; or the WorkNotifier's, which waits for backends that cannot notify and
  // enforces the deadline). PG_ERR_INVALID_ARGUMENT if the work has a callback already.
  Status on_complete(Callback callback);

  const OpLabel& label() const { return label_; }
  const OpTrace& trace() const { return trace_; }
  std::shared_ptr<GroupState> group() const { return group_.lock(); }
  Deadline deadline() const { return deadline_; }
  bool done();

 private:
  Status test_unfired();
  Status wait_unfired(Deadline wait_deadline);
  Status poll_backend_locked(Millis wait_for);
  const Status& finish_locked(Status status);
  const Status& timeout_locked();
  // Frees the backend work if it still has one.
  void release_backend_work_locked();
  // After a lock scope that may have finished the work: runs the callback once.
  void fire_callback();
  // Asks the backend to call backend_done() when the work completes (outside the lock).
  void arm_backend_notify();
  static void backend_done(void* self_ref);

  std::weak_ptr<GroupState> group_;
  const OpLabel label_;
  const Deadline deadline_;
  const uint64_t trace_id_;
  const OpTrace trace_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::atomic<bool> done_{false};  // written under mutex_; done() reads it without
  Status status_;
  const pg_backend_ops_t* ops_ = nullptr;
  std::string backend_;
  pg_backend_work_t backend_work_ = nullptr;
  std::function<Status()> on_success_;
  pg_backend_on_complete_fn notify_ = nullptr;
  Callback callback_;          // until fired
  // Finished with a callback set: whoever finished it fires it. Atomic so that test() and
  // wait() check it without taking the lock again (the per-operation path).
  std::atomic<bool> callback_due_{false};
  bool callback_fired_ = false;
  bool watched_ = false;  // handed to the WorkNotifier (which forgets it once fired)
  // The backend was asked to notify (it then owns a reference to this work until it
  // does) and has not yet: backend_work_ stays unreleased until backend_done runs.
  bool notify_armed_ = false;
  bool notify_fired_ = false;
};

}  // namespace procgroup::detail
