// nccl_comm.h — one rank's NCCL communicator, its internal stream, and its failure state.
//
// Shared (std::shared_ptr) by the group and by every work, so works outlive their group.
// All NCCL calls on the communicator are serialised by one lock, which keeps NCCL's
// "same order on every rank" and its "no call while another is in progress" rules for
// non-blocking communicators. The first failure is kept; it aborts the communicator
// (ncclCommAbort), and every later operation or pending work reports it.
//
//   Status st = comm->enqueue(deadline, [&](ncclComm_t c, cudaStream_t s) {
//     return comm->settle(ncclAllReduce(..., c, s), "ncclAllReduce", deadline);
//   });
//   comm->fail(nccl_error(PG_ERR_ABORTED, "group_abort was called"));
#ifndef PROCGROUP_BACKENDS_NCCL_NCCL_COMM_H_
#define PROCGROUP_BACKENDS_NCCL_NCCL_COMM_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "nccl_status.h"

namespace procgroup::nccl_backend {

class Work;

class Comm {
 public:
  Comm(int rank, int size, int device, int64_t timeout_ms, std::string name);
  ~Comm();  // frees the stream and scratch; the communicator is already gone
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  // The internal stream and the barrier's scratch, on the current (this comm's) device.
  Status create_resources();
  void adopt(ncclComm_t comm);

  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }
  int64_t timeout_ms() const { return timeout_ms_; }
  const std::string& name() const { return name_; }
  cudaStream_t stream() const { return stream_; }
  int32_t* barrier_scratch() const { return barrier_scratch_; }

  // Runs fn(comm, stream) holding the NCCL lock; fails the group if fn fails. Refuses
  // with PG_ERR_ABORTED once the communicator failed or was destroyed. When fn succeeds,
  // `issued` (if any) is tracked as in flight (see fail()).
  template <class Fn>
  Status enqueue(Fn&& fn, const std::shared_ptr<Work>& issued = nullptr) {
    Status st;
    {
      std::lock_guard lock(mu_);
      if (Status refused = refuse_locked(); !refused.ok()) return refused;
      st = fn(comm_, stream_);
      if (st.ok() && issued != nullptr) track_locked(issued);
    }
    if (!st.ok() && st.code != PG_ERR_ABORTED) fail(st);
    return st;
  }

  // Timing-free events of this device, reused: creating one per operation cost more than
  // the rest of the plugin's work for a small operation. Call on this comm's device.
  Status take_event(cudaEvent_t* out, const std::string& what);
  void give_back_event(cudaEvent_t event);
  // PG_ERR_INVALID_ARGUMENT unless `stream` belongs to this comm's device (the last one seen
  // good is remembered, so a training loop's one stream is asked about once).
  Status check_stream(cudaStream_t stream, const std::string& label);
  // Inside enqueue: a NCCL call's result as a status, waiting out ncclInProgress (up to
  // the deadline, or until an abort is requested).
  Status settle(ncclResult_t result, const std::string& what, Clock::time_point deadline);

  // Records the first failure, aborts the communicator, wakes every waiter. Returns true
  // when this call's cause became the group's failure. Before aborting it settles as PG_OK
  // every in-flight work whose event has already completed: after ncclCommAbort the
  // aborted kernels return and every later event completes too, so from then on a
  // completed event no longer means the operation ran (Work::poll).
  bool fail(const Status& cause);
  std::optional<Status> failure() const;
  // Polls ncclCommGetAsyncError; an error fails the group (the status names `label`).
  // Returns that failure when this call detected it.
  std::optional<Status> check_async(const std::string& label);

  // Send and recv wait here until something needs them issued; then every deferred one
  // goes to NCCL in one group call, so exchanges in both directions progress together.
  void defer_p2p(std::shared_ptr<Work> work);
  void flush_p2p();

  // group_destroy: issues deferred work, waits (up to the timeout) for the stream to
  // drain, then finalizes and destroys the communicator (aborts it on any failure).
  Status shutdown();

  // Keeps memory a non-blocking NCCL call on this communicator may still write to (a failed
  // split's output) until this object is destroyed, after the communicator.
  void keep_until_gone(std::shared_ptr<const void> state);

 private:
  const int rank_, size_, device_;
  const int64_t timeout_ms_;
  const std::string name_;
  cudaStream_t stream_ = nullptr;
  int32_t* barrier_scratch_ = nullptr;

  std::mutex mu_;  // NCCL calls, comm_, pending_p2p_
  ncclComm_t comm_ = nullptr;
  std::vector<std::shared_ptr<Work>> pending_p2p_;
  // Issued works in issue order, until seen complete or the communicator ends: released
  // ones too, so group_destroy can wait for them whatever stream they run on. Under mu_.
  std::deque<std::shared_ptr<Work>> inflight_;
  Status refuse_locked() const;
  void track_locked(const std::shared_ptr<Work>& work);
  void settle_inflight_locked();
  std::atomic<bool> abort_requested_{false};
  std::vector<std::shared_ptr<const void>> kept_;  // under mu_
  std::mutex events_mu_;
  std::vector<cudaEvent_t> free_events_;  // under events_mu_
  std::atomic<cudaStream_t> known_stream_{nullptr};

  mutable std::mutex state_mu_;  // failure_
  std::optional<Status> failure_;
};

// The one wait for a non-blocking NCCL call (init, split, an operation): polls
// ncclCommGetAsyncError on comm while the result is ncclInProgress, backing off from spinning
// to sleeping, until NCCL settles, interrupt() has a status (an abort, a rank that gave up)
// or the deadline passes (then timed_out()'s status). NCCL's own errors name `what`.
Status await_nccl(ncclComm_t comm, ncclResult_t result, const std::string& what,
                  Clock::time_point deadline,
                  const std::function<std::optional<Status>()>& interrupt,
                  const std::function<Status()>& timed_out);

// Backs off from spinning to sleeping while polling CUDA or NCCL state: it yields for the
// first 2 ms (a blocking wait for a ~200 us operation must not oversleep it), then sleeps
// 20 us, doubling up to 1 ms.
class Backoff {
 public:
  void pause();

 private:
  static constexpr std::chrono::microseconds kSpinFor{2000};
  Clock::time_point spin_until_{};
  bool sleeping_ = false;
  int sleep_us_ = 20;
};

}  // namespace procgroup::nccl_backend

#endif  // PROCGROUP_BACKENDS_NCCL_NCCL_COMM_H_
