// A torch Work over a procgroup work. wait() and isCompleted() ask procgroup directly (no
// extra thread on the latency path); getFuture() from C++ (DDP's reducer) asks procgroup
// for a completion callback (pg_work_on_complete), which marks the future on the thread
// that completes the work; from Python it hands the work to the group's completer thread,
// since Python callbacks need the GIL. Either way DDP's comm hooks and `.then()` callbacks
// run without anyone calling wait(). Failures
// carry procgroup's status name and message ("PG_ERR_PEER_LOST: ...").
#pragma once

#include <ATen/core/ivalue.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "procgroup/procgroup.h"

namespace procgroup::torch_backend {

class Completer;

class PgWork : public c10d::Work {
 public:
  // outputs: what result() and the future return; keep: every other tensor the operation
  // reads or writes (inputs, staging), held until it is done. on_success runs once when the
  // work has completed successfully, before anyone sees it done (copies into outputs).
  PgWork(pg_work_t work, c10d::OpType type, const char* call, std::vector<at::Tensor> outputs,
         std::vector<at::Tensor> keep, std::function<void()> on_success,
         std::shared_ptr<Completer> completer);
  // A work dropped while pending goes to the completer with its tensors, which outlive it.
  ~PgWork() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  std::vector<at::Tensor> result() override;
  void synchronize() override {}  // the host waited for the device work already
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  // Records procgroup's answer once; later calls keep the first.
  void settle(pg_status_t status);

  pg_work_t work_;
  const char* call_;
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keep_;
  std::function<void()> on_success_;
  std::shared_ptr<Completer> completer_;  // shared: a work may outlive its group
  mutable std::mutex settle_mutex_;
  bool settled_ = false;
  std::exception_ptr error_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// Several works as one: what torch gets for a call procgroup runs as several operations
// (allgather_coalesced, the *_coalesced tensor calls) and from endCoalescing. Done when every
// part is done; fails with the first part's failure; result() and the future's value are
// the parts' outputs in order.
class CoalescedWork : public c10d::Work {
 public:
  CoalescedWork(c10d::OpType type, std::vector<c10::intrusive_ptr<c10d::Work>> parts);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  std::vector<at::Tensor> result() override;
  void synchronize() override {}
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  std::vector<c10::intrusive_ptr<c10d::Work>> parts_;
  std::mutex future_mutex_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// One thread per torch group that waits, in issue order, for works whose future Python
// asked for (and completes the future) and for works dropped while pending (and frees them
// and the tensors they use).
class Completer {
 public:
  Completer();
  ~Completer();
  // Completes what is queued (each bounded by its group timeout) and joins the thread; the
  // owning group calls it, so the thread never outlives the group. Works added later (a
  // future asked for after the group was destroyed) are waited for by the caller.
  void stop();
  void add(std::function<void()> wait_for_work);

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

// Throws c10::Error "procgroup <call>: PG_ERR_...: <pg_last_error()>" unless status is OK.
void check_issued(pg_status_t status, const char* call);

}  // namespace procgroup::torch_backend
