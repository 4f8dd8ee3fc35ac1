// nccl_work.h — one operation of the nccl backend: events on the caller's streams that
// it starts after, and the CUDA event recorded after it on the communicator's stream.
//
// test() polls that event; wait() polls it until it completes, the caller's own time
// runs out (PG_PENDING) or the operation's deadline passes, watching
// ncclCommGetAsyncError meanwhile. A deadline passed or an asynchronous error aborts the
// communicator, and this work reports it (PG_ERR_TIMEOUT, PG_ERR_BACKEND, or
// PG_ERR_PEER_LOST for NCCL's remote errors); every other pending work then reports
// PG_ERR_ABORTED naming that cause.
//
//   auto work = std::make_shared<Work>(comm, "allreduce #3", 60000);
//   PG_NCCL_TRY(work->prepare(plan.streams));    // start events recorded on user streams
//   ... enqueue, cudaEventRecord(work->done(), stream), work->set_issued(true) ...
//   Status st = work->wait(-1);
#ifndef PROCGROUP_BACKENDS_NCCL_NCCL_WORK_H_
#define PROCGROUP_BACKENDS_NCCL_NCCL_WORK_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "nccl_comm.h"
#include "nccl_cuda.h"
#include "nccl_status.h"

namespace procgroup::nccl_backend {

// A send or recv waiting in Comm::defer_p2p.
struct P2p {
  bool send = true;
  void* data = nullptr;
  size_t count = 0;
  ncclDataType_t dtype = ncclUint8;
  int peer = 0;
};

class Work {
 public:
  // The operation must complete within timeout_ms of now.
  Work(std::shared_ptr<Comm> comm, std::string label, int64_t timeout_ms);
  ~Work();
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  // Creates the events (on the current device) and records one on each user stream
  // (NULL: the legacy default stream), so the operation starts after their work.
  Status prepare(const std::vector<cudaStream_t>& streams);
  const std::vector<cudaEvent_t>& starts() const { return starts_; }
  cudaEvent_t done() const { return done_.get(); }
  const std::string& label() const { return label_; }
  Clock::time_point deadline() const { return deadline_; }

  // recorded: done() was recorded after the operation; false: it will never be issued
  // (the communicator failed first), and the work reports that failure.
  void set_issued(bool recorded);
  std::optional<P2p> p2p;
  // With its communicator's lock held: if done() has completed, the work's result
  // becomes PG_OK (kept even if the communicator fails later). True when complete.
  bool settle_if_complete();

  // PG_OK, PG_PENDING or the error.
  Status test();
  // Waits up to timeout_ms (< 0: until the operation's deadline).
  Status wait(int64_t timeout_ms);

 private:
  Status finish(Status outcome);
  Status poll();  // one look at the event, the communicator and the deadline

  std::shared_ptr<Comm> comm_;
  const std::string label_;
  const int64_t timeout_ms_;
  const Clock::time_point deadline_;
  std::vector<Event> start_events_;
  std::vector<cudaEvent_t> starts_;
  Event done_;
  std::atomic<bool> issued_{false};
  std::atomic<bool> recorded_{false};
  std::mutex mu_;
  std::optional<Status> result_;  // set once
};

}  // namespace procgroup::nccl_backend

#endif  // PROCGROUP_BACKENDS_NCCL_NCCL_WORK_H_
