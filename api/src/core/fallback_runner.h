// Runs a group's emulated operations, one after another in issue order, on a thread of
// its own (started on first use: groups whose backend does everything never start it).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace procgroup::detail {

class FallbackRunner {
 public:
  explicit FallbackRunner(std::string name) : name_(std::move(name)) {}
  ~FallbackRunner() { stop(); }
  FallbackRunner(const FallbackRunner&) = delete;
  FallbackRunner& operator=(const FallbackRunner&) = delete;

  // Queues a task. Tasks must not throw (they report through their work).
  void post(std::function<void()> task);
  // True while tasks are queued or running: new native operations must then queue
  // behind them to keep issue order.
  bool busy();
  // Runs what is queued, then joins the thread.
  void stop();

 private:
  void loop();

  const std::string name_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  // Tasks posted and not yet finished: busy() reads it on every native operation's path.
  std::atomic<size_t> unfinished_{0};
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace procgroup::detail
