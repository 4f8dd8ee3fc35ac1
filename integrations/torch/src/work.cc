#include "work.h"

#include <ATen/core/jit_type.h>
#include <Python.h>

#include <algorithm>
#include <string>

namespace procgroup::torch_backend {
namespace {

std::string failure_text(pg_status_t status, const char* call) {
  std::string text =
      std::string("procgroup ") + call + ": " + pg_status_name(status) + ": " + pg_last_error();
  // procgroup names its own settings (pg_group_options_t / pg_op_options_t.timeout_ms),
  // which this extension fills from torch's.
  if (status == PG_ERR_TIMEOUT)
    text +=
        " (under torch: init_process_group(timeout=...) or new_group(timeout=...) for "
        "the group, an options object's timeout for one call)";
  return text;
}

std::vector<c10::Device> devices_of(const std::vector<at::Tensor>& tensors) {
  std::vector<c10::Device> devices;
  for (const at::Tensor& t : tensors)
    if (t.device().is_cuda() &&
        std::find(devices.begin(), devices.end(), t.device()) == devices.end())
      devices.push_back(t.device());
  return devices;
}

}  // namespace

void check_issued(pg_status_t status, const char* call) {
  if (status == PG_OK) return;
  if (status == PG_ERR_UNSUPPORTED) TORCH_CHECK_NOT_IMPLEMENTED(false, failure_text(status, call));
  TORCH_CHECK(false, failure_text(status, call));
}

PgWork::PgWork(pg_work_t work, c10d::OpType type, const char* call, std::vector<at::Tensor> outputs,
               std::vector<at::Tensor> keep, std::function<void()> on_success,
               std::shared_ptr<Completer> completer)
    : c10d::Work(-1, type),
      work_(work),
      call_(call),
      outputs_(std::move(outputs)),
      keep_(std::move(keep)),
      on_success_(std::move(on_success)),
      completer_(std::move(completer)) {}

PgWork::~PgWork() {
  if (pg_work_test(work_) != PG_PENDING) {
    pg_work_release(work_);
    return;
  }
  // procgroup still reads or writes these tensors: they live until it is done.
  completer_->add([work = work_, outputs = std::move(outputs_), keep = std::move(keep_),
                   staged = std::move(on_success_)] {
    pg_work_wait(work, -1);
    pg_work_release(work);
  });
}

void PgWork::settle(pg_status_t status) {
  c10::intrusive_ptr<c10::ivalue::Future> future;
  {
    std::lock_guard lock(settle_mutex_);
    if (settled_) return;
    if (status == PG_OK && on_success_) {
      try {
        on_success_();
      } catch (const std::exception& e) {
        error_ = std::make_exception_ptr(
            std::runtime_error(std::string("procgroup ") + call_ + ": " + e.what()));
      }
    } else if (status != PG_OK) {
      error_ = std::make_exception_ptr(std::runtime_error(failure_text(status, call_)));
    }
    settled_ = true;
    future = future_;
  }
  {
    std::lock_guard lock(mutex_);  // the base class's completion state
    completed_ = true;
    exception_ = error_;
  }
  cv_.notify_all();
  if (!future) return;
  if (error_)
    future->setError(error_);
  else
    future->markCompleted(c10::IValue(outputs_));
}

bool PgWork::isCompleted() {
  {
    std::lock_guard lock(settle_mutex_);
    if (settled_) return true;
  }
  pg_status_t status = pg_work_test(work_);
  if (status == PG_PENDING) return false;
  settle(status);
  return true;
}

bool PgWork::isSuccess() const {
  std::lock_guard lock(settle_mutex_);
  return settled_ && !error_;
}

std::exception_ptr PgWork::exception() const {
  std::lock_guard lock(settle_mutex_);
  return error_;
}

bool PgWork::wait(std::chrono::milliseconds timeout) {
  // torch's kNoTimeout (0): until done, bounded by the op's own timeout in procgroup.
  pg_status_t status = pg_work_wait(work_, timeout.count() > 0 ? timeout.count() : -1);
  if (status == PG_PENDING) {
    TORCH_CHECK(false, "procgroup ", call_, ": wait timed out after ", timeout.count(),
                " ms (the operation goes on)");
  }
  settle(status);
  std::lock_guard lock(settle_mutex_);
  if (error_) std::rethrow_exception(error_);
  return true;
}

std::vector<at::Tensor> PgWork::result() { return outputs_; }

c10::intrusive_ptr<c10::ivalue::Future> PgWork::getFuture() {
  {
    std::lock_guard lock(settle_mutex_);
    if (future_) return future_;
    future_ = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()), devices_of(outputs_));
    if (settled_) {
      if (error_)
        future_->setError(error_);
      else
        future_->markCompleted(c10::IValue(outputs_));
      return future_;
    }
  }
  if (PyGILState_Check()) {
    // Asked from Python: its `.then()` callbacks (and the last reference to its tensors)
    // take the GIL, which must never stall the backend's own thread (gloo runs one
    // operation at a time on it, so a GIL holder waiting for the next one would deadlock).
    completer_->add([self = c10::intrusive_ptr<PgWork>::reclaim_copy(this)] {
      self->settle(pg_work_wait(self->work_, -1));
    });
    return future_;
  }
  // Asked from C++ (DDP's reducer, without the GIL): completed on the thread that completes
  // the work (the backend's own, for backends that notify), as torch's gloo does, so no
  // thread of ours wakes up in between.
  auto* self = new c10::intrusive_ptr<PgWork>(c10::intrusive_ptr<PgWork>::reclaim_copy(this));
  const pg_status_t asked = pg_work_on_complete(
      work_,
      [](pg_status_t status, void* user) {
        std::unique_ptr<c10::intrusive_ptr<PgWork>> work(
            static_cast<c10::intrusive_ptr<PgWork>*>(user));
        (*work)->settle(status);  // pg_last_error() has the failure's words here
      },
      self);
  if (asked != PG_OK) {
    delete self;
    settle(asked);  // cannot happen for a live work; fail the future rather than hang it
  }
  return future_;
}

CoalescedWork::CoalescedWork(c10d::OpType type, std::vector<c10::intrusive_ptr<c10d::Work>> parts)
    : c10d::Work(-1, type), parts_(std::move(parts)) {}

bool CoalescedWork::isCompleted() {
  return std::all_of(parts_.begin(), parts_.end(), [](const auto& w) { return w->isCompleted(); });
}

bool CoalescedWork::isSuccess() const {
  return std::all_of(parts_.begin(), parts_.end(), [](const auto& w) { return w->isSuccess(); });
}

std::exception_ptr CoalescedWork::exception() const {
  for (const auto& w : parts_)
    if (auto e = w->exception()) return e;
  return nullptr;
}

bool CoalescedWork::wait(std::chrono::milliseconds timeout) {
  // One deadline for all the parts; kNoTimeout (0): each until done.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const auto& w : parts_) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (timeout.count() > 0 && left.count() <= 0) left = std::chrono::milliseconds(1);
    w->wait(timeout.count() > 0 ? left : kNoTimeout);  // rethrows a part's failure
  }
  return true;
}

std::vector<at::Tensor> CoalescedWork::result() {
  std::vector<at::Tensor> all;
  for (const auto& w : parts_) {
    std::vector<at::Tensor> part = w->result();
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

c10::intrusive_ptr<c10::ivalue::Future> CoalescedWork::getFuture() {
  std::lock_guard lock(future_mutex_);
  if (future_) return future_;
  std::vector<c10::intrusive_ptr<c10::ivalue::Future>> futures;
  std::vector<c10::Device> devices;
  for (const auto& w : parts_) {
    futures.push_back(w->getFuture());
    for (const c10::Device& d : futures.back()->devices())
      if (std::find(devices.begin(), devices.end(), d) == devices.end()) devices.push_back(d);
  }
  future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                     devices);
  if (futures.empty()) {
    future_->markCompleted(c10::IValue(std::vector<at::Tensor>{}));
    return future_;
  }
  // The last part to finish completes the whole, with the first failure if any.
  struct Pending {
    std::mutex mutex;
    size_t left;
    std::exception_ptr error;
  };
  auto pending = std::make_shared<Pending>();
  pending->left = futures.size();
  for (const auto& f : futures) {
    f->addCallback([pending, whole = future_, parts = parts_](c10::ivalue::Future& part) {
      std::unique_lock guard(pending->mutex);
      if (part.hasError() && !pending->error) pending->error = part.exception_ptr();
      if (--pending->left > 0) return;
      guard.unlock();
      if (pending->error) {
        whole->setError(pending->error);
        return;
      }
      std::vector<at::Tensor> all;
      for (const auto& w : parts) {
        std::vector<at::Tensor> out = w->result();
        all.insert(all.end(), out.begin(), out.end());
      }
      whole->markCompleted(c10::IValue(all));
    });
  }
  return future_;
}

Completer::Completer() : thread_([this] { run(); }) {}

Completer::~Completer() { stop(); }

void Completer::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Completer::add(std::function<void()> wait_for_work) {
  {
    std::lock_guard lock(mutex_);
    if (!stopping_) {
      queue_.push_back(std::move(wait_for_work));
      cv_.notify_one();
      return;
    }
  }
  wait_for_work();
}

void Completer::run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to complete
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace procgroup::torch_backend
