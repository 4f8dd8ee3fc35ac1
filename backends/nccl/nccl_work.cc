// Works of the nccl backend (see nccl_work.h).
#include "nccl_work.h"

#include <utility>

namespace procgroup::nccl_backend {

Work::Work(std::shared_ptr<Comm> comm, std::string label, int64_t timeout_ms)
    : comm_(std::move(comm)),
      label_(std::move(label)),
      timeout_ms_(timeout_ms),
      deadline_(Clock::now() + std::chrono::milliseconds(timeout_ms)) {}

Work::~Work() {
  // Events belong to the communicator's device; free them there.
  DeviceGuard on(comm_->device());
  start_events_.clear();
  done_.reset();
}

Status Work::prepare(const std::vector<cudaStream_t>& streams) {
  start_events_ = std::vector<Event>(streams.size());
  for (size_t i = 0; i < streams.size(); ++i) {
    PG_NCCL_TRY(start_events_[i].create(label_));
    // NULL is the legacy default stream, whatever this plugin was compiled with.
    cudaStream_t s = streams[i] != nullptr ? streams[i] : cudaStreamLegacy;
    const cudaError_t err = cudaEventRecord(start_events_[i].get(), s);
    if (err != cudaSuccess) {
      // Most likely a stream of another device, or one already destroyed: the caller's.
      (void)cudaGetLastError();
      return Status::error(PG_ERR_INVALID_ARGUMENT,
                           label_ + ": the buffer's stream is not usable on cuda:" +
                               std::to_string(comm_->device()) +
                               " (cudaEventRecord: " + cuda_error_text(err) + ")");
    }
    starts_.push_back(start_events_[i].get());
  }
  return done_.create(label_);
}

void Work::set_issued(bool recorded) {
  recorded_.store(recorded);
  issued_.store(true);
}

bool Work::settle_if_complete() {
  if (!recorded_.load()) return false;
  const cudaError_t q = cudaEventQuery(done_.get());
  if (q != cudaSuccess) {
    if (q != cudaErrorNotReady) (void)cudaGetLastError();
    return false;
  }
  (void)finish(Status{});
  return true;
}

Status Work::finish(Status outcome) {
  std::lock_guard lock(mu_);
  if (!result_) result_ = std::move(outcome);
  return *result_;
}

Status Work::poll() {
  if (!issued_.load()) comm_->flush_p2p();  // a deferred send/recv is needed now
  // Events complete once ncclCommAbort has ended the kernels, so a completed event means
  // success only if no failure was recorded by the time it was seen (failures are recorded
  // before the abort). A work that completed before the failure was settled as PG_OK by
  // Comm::fail, and finish() keeps that.
  const cudaError_t q = recorded_.load() ? cudaEventQuery(done_.get()) : cudaErrorNotReady;
  const std::optional<Status> failed = comm_->failure();
  if (q == cudaSuccess && !failed) return finish(Status{});
  if (const auto& f = failed) {
    return finish(Status::error(PG_ERR_ABORTED, label_ +
                                                    " did not complete: the communicator was "
                                                    "aborted (" +
                                                    without_prefix(f->message) + ")"));
  }
  if (!recorded_.load()) {
    return finish(Status::error(PG_ERR_ABORTED, label_ + " was never issued"));
  }
  if (q != cudaErrorNotReady) {
    // A CUDA error here is sticky for the context: nothing on this device can be trusted.
    Status st = cuda_status(q, label_ + ": cudaEventQuery");
    return finish(comm_->fail(st) ? st : Status{PG_ERR_ABORTED, st.message});
  }
  if (auto async = comm_->check_async(label_)) return finish(*async);
  if (Clock::now() > deadline_) {
    Status timeout = Status::error(
        PG_ERR_TIMEOUT, label_ + " did not complete within " + std::to_string(timeout_ms_) +
                            " ms; the communicator was aborted (a rank may have stopped, left, "
                            "or issued different operations)");
    if (comm_->fail(timeout)) return finish(timeout);
    return poll();  // another cause won: report that one
  }
  return {PG_PENDING, ""};
}

Status Work::test() {
  {
    std::lock_guard lock(mu_);
    if (result_) return *result_;
  }
  // The core may test from any thread: query on the communicator's device, so a thread
  // with no context does not create one on GPU 0.
  DeviceGuard on(comm_->device());
  return poll();
}

Status Work::wait(int64_t timeout_ms) {
  const Clock::time_point own = timeout_ms < 0
                                    ? Clock::time_point::max()
                                    : Clock::now() + std::chrono::milliseconds(timeout_ms);
  Backoff backoff;
  for (;;) {
    Status st = test();
    if (st.code != PG_PENDING) return st;
    if (Clock::now() >= own) return st;
    backoff.pause();
  }
}

}  // namespace procgroup::nccl_backend
