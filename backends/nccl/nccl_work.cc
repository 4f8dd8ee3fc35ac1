// Works of the nccl backend (see nccl_work.h).
#include "nccl_work.h"

#include <utility>

#include "procgroup/backend_kit/work.hpp"

namespace procgroup::nccl_backend {

Work::Work(std::shared_ptr<Comm> comm, std::string label, int64_t timeout_ms)
    : comm_(std::move(comm)),
      label_(std::move(label)),
      timeout_ms_(timeout_ms),
      // The coarse clock (a few ms late at worst): the exact one is a system call on some
      // virtual machines, and this runs for every operation.
      deadline_(kit::lazy_deadline_after(timeout_ms)) {}

Work::~Work() {
  // Back to the communicator's pool: a completed or abandoned event is reusable as is.
  for (size_t i = 0; i < start_count_; ++i) comm_->give_back_event(starts_[i]);
  comm_->give_back_event(done_);
}

Status Work::prepare(const Plan& plan) {
  own_stream_ = plan.stream_count == 1 && plan.streams[0] != nullptr;
  if (!own_stream_) return prepare_on_internal_stream(plan);
  own_ = plan.streams[0];
  PG_KIT_TRY(comm_->check_stream(own_, label_));
  return comm_->take_event(&done_, label_);
}

Status Work::prepare_on_internal_stream(const Plan& plan) {
  own_stream_ = false;
  PG_KIT_TRY(record_starts(plan));
  return comm_->take_event(&done_, label_);
}

Status Work::record_starts(const Plan& plan) {
  for (size_t i = 0; i < plan.stream_count; ++i) {
    PG_KIT_TRY(comm_->take_event(&starts_[i], label_));
    ++start_count_;
    // NULL is the legacy default stream, whatever this plugin was compiled with.
    cudaStream_t s = plan.streams[i] != nullptr ? plan.streams[i] : cudaStreamLegacy;
    const cudaError_t err = cudaEventRecord(starts_[i], s);
    if (err != cudaSuccess) {
      // Most likely a stream of another device, or one already destroyed: the caller's.
      (void)cudaGetLastError();
      return nccl_error(PG_ERR_INVALID_ARGUMENT,
                           label_ + ": the buffer's stream is not usable on cuda:" +
                               std::to_string(comm_->device()) +
                               " (cudaEventRecord: " + cuda_error_text(err) + ")");
    }
  }
  return {};
}

void Work::set_issued(bool recorded) {
  recorded_.store(recorded);
  issued_.store(true);
}

void Work::set_failed(const Status& cause) {
  (void)finish(cause);
  set_issued(false);
}

bool Work::settle_if_complete() {
  if (!recorded_.load()) return false;
  const cudaError_t q = cudaEventQuery(done_);
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
  const cudaError_t q = recorded_.load() ? cudaEventQuery(done_) : cudaErrorNotReady;
  const std::optional<Status> failed = comm_->failure();
  if (q == cudaSuccess && !failed) return finish(Status{});
  if (const auto& f = failed) {
    return finish(nccl_error(PG_ERR_ABORTED, label_ +
                                                    " did not complete: the communicator was "
                                                    "aborted (" +
                                                    without_prefix(f->message) + ")"));
  }
  if (!recorded_.load()) {
    return finish(nccl_error(PG_ERR_ABORTED, label_ + " was never issued"));
  }
  if (q != cudaErrorNotReady) {
    // A CUDA error here is sticky for the context: nothing on this device can be trusted.
    Status st = cuda_status(q, label_ + ": cudaEventQuery");
    return finish(comm_->fail(st) ? st : Status{PG_ERR_ABORTED, st.message});
  }
  if (auto async = comm_->check_async(label_)) return finish(*async);
  if (Clock::now() > deadline_) {
    Status timeout = nccl_error(
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
