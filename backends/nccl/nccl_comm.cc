// The communicator's lock, failure and shutdown (see nccl_comm.h).
#include "nccl_comm.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "nccl_cuda.h"
#include "nccl_work.h"

namespace procgroup::nccl_backend {

void Backoff::pause() {
  if (!sleeping_) {
    const Clock::time_point now = Clock::now();
    if (spin_until_ == Clock::time_point{}) spin_until_ = now + kSpinFor;
    if (now < spin_until_) {
      std::this_thread::yield();
      return;
    }
    sleeping_ = true;
  }
  std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_));
  if (sleep_us_ < 1000) sleep_us_ *= 2;
}

Comm::Comm(int rank, int size, int device, int64_t timeout_ms, std::string name)
    : rank_(rank), size_(size), device_(device), timeout_ms_(timeout_ms), name_(std::move(name)) {}

Comm::~Comm() {
  DeviceGuard on(device_);
  for (cudaEvent_t e : free_events_) (void)cudaEventDestroy(e);
  if (barrier_scratch_ != nullptr) (void)cudaFree(barrier_scratch_);
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  (void)cudaGetLastError();
}

Status Comm::create_resources() {
  // Non-blocking: the legacy default stream does not serialise with it; every operation
  // orders itself after the caller's stream through an event instead.
  PG_KIT_TRY(cuda_status(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                          "group_create: cudaStreamCreateWithFlags"));
  PG_KIT_TRY(cuda_status(cudaMalloc(reinterpret_cast<void**>(&barrier_scratch_), sizeof(int32_t)),
                          "group_create: cudaMalloc (barrier scratch)"));
  return cuda_status(cudaMemset(barrier_scratch_, 0, sizeof(int32_t)),
                     "group_create: cudaMemset (barrier scratch)");
}

void Comm::adopt(ncclComm_t comm) {
  std::lock_guard lock(mu_);
  comm_ = comm;
}

std::optional<Status> Comm::failure() const {
  std::lock_guard lock(state_mu_);
  return failure_;
}

Status Comm::take_event(cudaEvent_t* out, const std::string& what) {
  {
    std::lock_guard lock(events_mu_);
    if (!free_events_.empty()) {
      *out = free_events_.back();
      free_events_.pop_back();
      return {};
    }
  }
  return cuda_status(cudaEventCreateWithFlags(out, cudaEventDisableTiming),
                     what + ": cudaEventCreate");
}

void Comm::give_back_event(cudaEvent_t event) {
  if (event == nullptr) return;
  std::lock_guard lock(events_mu_);
  free_events_.push_back(event);
}

Status Comm::check_stream(cudaStream_t stream, const std::string& label) {
  if (known_stream_.load(std::memory_order_relaxed) == stream) return {};
  int device = -1;
  const cudaError_t err = cudaStreamGetDevice(stream, &device);
  if (err != cudaSuccess || device != device_) {
    if (err != cudaSuccess) (void)cudaGetLastError();
    return nccl_error(PG_ERR_INVALID_ARGUMENT,
                         label + ": the buffer's stream is not usable on cuda:" +
                             std::to_string(device_) + " (" +
                             (err != cudaSuccess ? "cudaStreamGetDevice: " + cuda_error_text(err)
                                                 : "it is a stream of cuda:" +
                                                       std::to_string(device)) +
                             ")");
  }
  known_stream_.store(stream, std::memory_order_relaxed);
  return {};
}

void Comm::track_locked(const std::shared_ptr<Work>& work) {
  // Drop what has completed, oldest first (the stream completes it in that order).
  while (!inflight_.empty() && inflight_.front()->settle_if_complete()) inflight_.pop_front();
  if (work != nullptr) inflight_.push_back(work);
}

void Comm::settle_inflight_locked() {
  for (const std::shared_ptr<Work>& work : inflight_) (void)work->settle_if_complete();
  inflight_.clear();
}

Status Comm::refuse_locked() const {
  if (auto f = failure()) {
    return nccl_error(PG_ERR_ABORTED,
                         "the communicator failed earlier: " + without_prefix(f->message));
  }
  if (comm_ == nullptr) return nccl_error(PG_ERR_ABORTED, "the group was destroyed");
  return {};
}

Status await_nccl(ncclComm_t comm, ncclResult_t result, const std::string& what,
                  Clock::time_point deadline,
                  const std::function<std::optional<Status>()>& interrupt,
                  const std::function<Status()>& timed_out) {
  Backoff backoff;
  while (result == ncclInProgress) {
    if (std::optional<Status> stop = interrupt()) return *stop;
    if (Clock::now() > deadline) return timed_out();
    backoff.pause();
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    result = r != ncclSuccess ? r : state;
  }
  if (result == ncclSuccess) return {};
  return nccl_error(nccl_code(result), what + ": " + nccl_error_text(result, comm));
}

Status Comm::settle(ncclResult_t result, const std::string& what, Clock::time_point deadline) {
  return await_nccl(
      comm_, result, what, deadline,
      [&]() -> std::optional<Status> {
        if (!abort_requested_.load()) return std::nullopt;
        return nccl_error(PG_ERR_ABORTED, what + ": the communicator is being aborted");
      },
      [&] {
        return nccl_error(PG_ERR_TIMEOUT, what + ": NCCL was still in progress after " +
                                                 std::to_string(timeout_ms_) + " ms");
      });
}

bool Comm::fail(const Status& cause) {
  bool first = false;
  {
    std::lock_guard lock(state_mu_);
    if (!failure_) {
      failure_ = cause;
      first = true;
    }
  }
  abort_requested_.store(true);  // a settle loop holding the lock gives it up
  std::lock_guard lock(mu_);
  if (comm_ != nullptr) {
    DeviceGuard on(device_);
    // Last moment at which a completed event still means a completed operation.
    settle_inflight_locked();
    // Aborting stops NCCL's kernels, so the stream and every work's event complete.
    (void)ncclCommAbort(comm_);
    comm_ = nullptr;
  }
  return first;
}

std::optional<Status> Comm::check_async(const std::string& label) {
  Status error;
  {
    // A busy lock means an enqueue is under way; the next poll looks again.
    std::unique_lock lock(mu_, std::try_to_lock);
    if (!lock.owns_lock() || comm_ == nullptr) return std::nullopt;
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
    if (r != ncclSuccess) state = r;
    if (state == ncclSuccess || state == ncclInProgress) return std::nullopt;
    error = nccl_error(nccl_code(state), label + ": NCCL reported an asynchronous error: " +
                                                nccl_error_text(state, comm_) +
                                                "; the communicator was aborted");
  }
  if (fail(error)) return error;
  return std::nullopt;
}

void Comm::keep_until_gone(std::shared_ptr<const void> state) {
  std::lock_guard lock(mu_);
  kept_.push_back(std::move(state));
}

void Comm::defer_p2p(std::shared_ptr<Work> work) {
  std::lock_guard lock(mu_);
  pending_p2p_.push_back(std::move(work));
}

void Comm::flush_p2p() {
  std::vector<std::shared_ptr<Work>> batch;
  Status st;
  {
    std::lock_guard lock(mu_);
    batch.swap(pending_p2p_);
    if (batch.empty()) return;
    if (comm_ == nullptr || failure()) {
      for (auto& w : batch) w->set_issued(false);
      return;
    }
    DeviceGuard on(device_);
    // The batch's earliest deadline (op.timeout_ms), not the group timeout: a settle that
    // waits for peers must give up when the first of these operations would time out.
    Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms_);
    for (const auto& w : batch) deadline = std::min(deadline, w->deadline());
    std::string what = "ncclGroupEnd of " + std::to_string(batch.size()) +
                       " send/recv (first: " + batch.front()->label() + ")";
    st = on.status();
    for (auto& w : batch)
      for (const cudaEvent_t* e = w->starts_begin(); e != w->starts_end(); ++e)
        if (st.ok()) st = cuda_status(cudaStreamWaitEvent(stream_, *e, 0), w->label());
    if (st.ok()) {
      ncclResult_t first = ncclGroupStart();
      for (auto& w : batch) {
        if (first != ncclSuccess && first != ncclInProgress) break;
        const P2p& p = *w->p2p;
        first = p.send ? ncclSend(p.data, p.count, p.dtype, p.peer, comm_, stream_)
                       : ncclRecv(p.data, p.count, p.dtype, p.peer, comm_, stream_);
        if (first != ncclSuccess && first != ncclInProgress) what = w->label();
      }
      const ncclResult_t end = ncclGroupEnd();  // always closes the group it opened
      st = settle(first != ncclSuccess && first != ncclInProgress ? first : end, what, deadline);
    }
    for (auto& w : batch) {
      if (st.ok()) st = cuda_status(cudaEventRecord(w->done(), stream_), w->label());
      // A batch NCCL refused (a send to itself without a recv, say) fails with NCCL's words
      // in every work of it, not as "aborted".
      if (st.ok()) {
        w->set_issued(true);
        track_locked(w);
      } else {
        w->set_failed(st);
      }
    }
  }
  if (!st.ok()) fail(st);
}

Status Comm::shutdown() {
  flush_p2p();
  DeviceGuard on(device_);
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms_);
  Status result;
  if (!failure()) {
    // Released works may still run: wait for the stream to drain, within the timeout.
    Event drained;
    Status st = drained.create("group_destroy");
    if (st.ok()) {
      std::lock_guard lock(mu_);
      // Works issued on the callers' streams finish there: order the drain after them.
      for (const std::shared_ptr<Work>& w : inflight_)
        if (st.ok() && w->recorded())
          st = cuda_status(cudaStreamWaitEvent(stream_, w->done(), 0),
                           "group_destroy: cudaStreamWaitEvent");
      if (st.ok())
        st = cuda_status(cudaEventRecord(drained.get(), stream_), "group_destroy: cudaEventRecord");
    }
    Backoff backoff;
    while (st.ok()) {
      const cudaError_t q = cudaEventQuery(drained.get());
      if (q == cudaSuccess) break;
      if (q != cudaErrorNotReady) {
        st = cuda_status(q, "group_destroy: cudaEventQuery");
      } else if (auto async = check_async("group_destroy")) {
        st = *async;
      } else if (failure()) {
        break;
      } else if (Clock::now() > deadline) {
        st = nccl_error(PG_ERR_TIMEOUT, "group_destroy: operations were still running after " +
                                               std::to_string(timeout_ms_) +
                                               " ms; the communicator was aborted");
      }
      if (st.ok()) backoff.pause();
    }
    if (!st.ok()) {
      fail(st);
      result = st;
    }
  }
  std::lock_guard lock(mu_);
  inflight_.clear();  // drained (or settled by fail): nothing left to wait for
  if (comm_ == nullptr) return result;
  // Finalize flushes NCCL's own pending work; a failure there still ends in an abort.
  Status fin = settle(ncclCommFinalize(comm_), "group_destroy: ncclCommFinalize", deadline);
  const ncclResult_t r = fin.ok() ? ncclCommDestroy(comm_) : ncclCommAbort(comm_);
  comm_ = nullptr;
  if (!fin.ok()) return fin;
  if (r != ncclSuccess)
    return nccl_error(nccl_code(r),
                         "group_destroy: ncclCommDestroy: " + nccl_error_text(r, nullptr));
  return result;
}

}  // namespace procgroup::nccl_backend
