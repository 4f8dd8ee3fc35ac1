// nccl_work.h — one operation of the nccl backend: events on the caller's streams that
// it starts after, and the CUDA event recorded after it on the communicator's stream.
//
// An operation whose buffers share one stream runs on that stream itself, as a raw NCCL
// call would (no events before it); otherwise it runs on the communicator's internal stream
// after an event recorded on each buffer's stream. test() polls the done event; wait() polls it until it completes, the caller's own time
// runs out (PG_PENDING) or the operation's deadline passes, watching
// ncclCommGetAsyncError meanwhile. A deadline passed or an asynchronous error aborts the
// communicator, and this work reports it (PG_ERR_TIMEOUT, PG_ERR_BACKEND, or
// PG_ERR_PEER_LOST for NCCL's remote errors); every other pending work then reports
// PG_ERR_ABORTED naming that cause.
//
//   auto work = std::make_shared<Work>(comm, "allreduce #3", 60000);
//   PG_KIT_TRY(work->prepare(plan));   // pooled events; start events on user streams if needed
//   ... enqueue on work->stream(s), cudaEventRecord(work->done(), ...), work->set_issued(true) ...
//   Status st = work->wait(-1);
#ifndef PROCGROUP_BACKENDS_NCCL_NCCL_WORK_H_
#define PROCGROUP_BACKENDS_NCCL_NCCL_WORK_H_

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "nccl_comm.h"
#include "nccl_cuda.h"
#include "nccl_plan.h"
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

  // Takes the events (on the current device). If the plan's buffers share one explicit
  // stream, the operation runs there; else it records a start event on each buffer's
  // stream (NULL: the legacy default stream) for the internal stream to wait on.
  Status prepare(const Plan& plan);
  // For sends and recvs, which always go to the internal stream in one NCCL group.
  Status prepare_on_internal_stream(const Plan& plan);
  // The stream the operation runs on, given the communicator's internal one.
  cudaStream_t stream(cudaStream_t internal) const { return own_stream_ ? own_ : internal; }
  const cudaEvent_t* starts_begin() const { return starts_.data(); }
  const cudaEvent_t* starts_end() const { return starts_.data() + start_count_; }
  cudaEvent_t done() const { return done_; }
  bool recorded() const { return recorded_.load(); }
  const std::string& label() const { return label_; }
  Clock::time_point deadline() const { return deadline_; }

  // recorded: done() was recorded after the operation; false: it will never be issued
  // (the communicator failed first), and the work reports that failure.
  void set_issued(bool recorded);
  // The operation itself failed when issued (a send NCCL refused, say): report `cause`.
  void set_failed(const Status& cause);
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
  Status record_starts(const Plan& plan);
  bool own_stream_ = false;
  cudaStream_t own_ = nullptr;
  std::array<cudaEvent_t, 2> starts_{};
  size_t start_count_ = 0;
  cudaEvent_t done_ = nullptr;
  std::atomic<bool> issued_{false};
  std::atomic<bool> recorded_{false};
  std::mutex mu_;
  std::optional<Status> result_;  // set once
};

}  // namespace procgroup::nccl_backend

#endif  // PROCGROUP_BACKENDS_NCCL_NCCL_WORK_H_
