// ucx_task.h — the coroutine type every collective algorithm of the ucx backend is written in.
//
// An algorithm reads like blocking code and suspends wherever it waits for the network:
//
//   Task exchange(Op& op, int peer) {
//     Io io(op);
//     io.send(peer, mine, bytes, /*step=*/0);
//     io.recv(peer, theirs, bytes, 0);
//     co_return co_await io;               // suspends until both requests completed
//   }
//   PG_KIT_CO_TRY(co_await exchange(op, 1));   // a Task awaits another (symmetric transfer)
//
// A Task starts suspended; the group resumes it on the issuing thread (it posts its first
// messages at once) and later from its progress loop, always under the group's mutex and
// never inside a UCX callback. Nothing throws out of a Task: an exception becomes its Status.
#ifndef PROCGROUP_BACKENDS_UCX_UCX_TASK_H_
#define PROCGROUP_BACKENDS_UCX_UCX_TASK_H_

#include <coroutine>
#include <exception>
#include <new>
#include <utility>

#include "ucx_status.h"

namespace procgroup::ucx_backend {

class [[nodiscard]] Task {
 public:
  struct promise_type {
    Status result;
    std::coroutine_handle<> continuation;  // the awaiting Task, if any

    Task get_return_object() {
      return Task(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    struct Final {
      bool await_ready() noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> h) noexcept {
        std::coroutine_handle<> next = h.promise().continuation;
        return next ? next : std::noop_coroutine();
      }
      void await_resume() noexcept {}
    };
    Final final_suspend() noexcept { return {}; }
    void return_value(Status status) { result = std::move(status); }
    void unhandled_exception() noexcept {
      try {
        std::rethrow_exception(std::current_exception());
      } catch (const std::bad_alloc&) {
        result = Status::error(PG_ERR_OUT_OF_MEMORY, "ucx: out of memory");
      } catch (const std::exception& e) {
        result = Status::error(PG_ERR_INTERNAL, std::string("ucx: internal error: ") + e.what());
      } catch (...) {
        result = Status::error(PG_ERR_INTERNAL, "ucx: internal error (unknown exception)");
      }
    }
  };

  Task() = default;
  explicit Task(std::coroutine_handle<promise_type> h) : h_(h) {}
  Task(Task&& other) noexcept : h_(std::exchange(other.h_, nullptr)) {}
  Task& operator=(Task&& other) noexcept {
    std::swap(h_, other.h_);
    return *this;
  }
  ~Task() {
    if (h_) h_.destroy();
  }

  bool done() const { return h_.done(); }
  // Runs the top-level task until it first suspends (or finishes).
  void start() { h_.resume(); }
  Status& result() { return h_.promise().result; }

  // Awaiting a Task runs it now; its end resumes the awaiter.
  bool await_ready() const noexcept { return false; }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiting) noexcept {
    h_.promise().continuation = awaiting;
    return h_;
  }
  Status await_resume() { return std::move(h_.promise().result); }

 private:
  std::coroutine_handle<promise_type> h_;
};

}  // namespace procgroup::ucx_backend

#endif  // PROCGROUP_BACKENDS_UCX_UCX_TASK_H_
