// ucx_work.h — one issued operation of the ucx backend as its caller sees it.
//
// The caller's handle and the group's running operation share the Work, so a handle may be
// released while the work is pending. Waiting drives the group's progress (the waiter
// spins, then blocks on UCX's event fd: see ucx_group.h); a Work keeps its group's state
// alive, so a completed work can still be tested after group_destroy.
//
//   auto work = std::make_shared<Work>(group, deadline);
//   work->complete(Status{});                     // by the group, under its mutex, once
//   std::string message;
//   pg_status_t st = work->wait(100, &message);   // PG_OK, PG_PENDING or the error
#ifndef PROCGROUP_BACKENDS_UCX_UCX_WORK_H_
#define PROCGROUP_BACKENDS_UCX_UCX_WORK_H_

#include <atomic>
#include <memory>
#include <string>

#include "procgroup/procgroup_backend.h"
#include "ucx_status.h"

namespace procgroup::ucx_backend {

class UcxGroup;

class Work {
 public:
  Work(std::shared_ptr<UcxGroup> group, Clock::time_point deadline)
      : group_(std::move(group)), deadline_(deadline) {}

  bool done() const { return done_.load(std::memory_order_acquire); }

  // Completes the work once (under the group's mutex); later calls change nothing.
  void complete(Status outcome);
  // PG_OK, PG_PENDING or the error (*message gets its text); polls the group once.
  pg_status_t test(std::string* message);
  // Waits up to timeout_ms; < 0: until the work's deadline plus a grace period (the group
  // fails every work by its deadline, so this returns).
  pg_status_t wait(int64_t timeout_ms, std::string* message);
  // The outcome once done().
  pg_status_t result(std::string* message) const;

 private:
  std::shared_ptr<UcxGroup> group_;
  const Clock::time_point deadline_;
  std::atomic<bool> done_{false};
  Status outcome_{PG_PENDING, {}};
};

}  // namespace procgroup::ucx_backend

#endif  // PROCGROUP_BACKENDS_UCX_UCX_WORK_H_
