// ucx_resources.h — RAII owners for the UCX objects of one group, and the blocking wait.
//
//   UcpContext ctx;  Status st = create_context(size, local, sizeof(Slot), init, nullptr, &ctx);
//   UcpWorker worker;  st = create_worker(ctx.get(), &worker);
//   std::string addr = worker_address(worker.get());  // what the peers need to connect
//   Waker waker;  st = waker.create(worker_event_fd(worker.get()));
//   waker.wait(10000, &ready);  // until UCX or wake() signals, 10 ms max
//
// The context reads the user's UCX environment (UCX_TLS, UCX_NET_DEVICES, ...) untouched,
// so shared memory is used within a node and TCP or RDMA across nodes as UCX decides.
#ifndef PROCGROUP_BACKENDS_UCX_UCX_RESOURCES_H_
#define PROCGROUP_BACKENDS_UCX_UCX_RESOURCES_H_

#include <ucp/api/ucp.h>

#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "ucx_status.h"

namespace procgroup::ucx_backend {

// PG_ERR_PEER_LOST for UCX's connection errors, PG_ERR_TIMEOUT for its timeouts,
// PG_ERR_OUT_OF_MEMORY, else PG_ERR_BACKEND.
pg_status_t status_of(ucs_status_t status);

struct ContextRelease {
  void operator()(ucp_context_h context) const { ucp_cleanup(context); }
};
struct WorkerRelease {
  void operator()(ucp_worker_h worker) const { ucp_worker_destroy(worker); }
};
using UcpContext = std::unique_ptr<std::remove_pointer_t<ucp_context_h>, ContextRelease>;
using UcpWorker = std::unique_ptr<std::remove_pointer_t<ucp_worker_h>, WorkerRelease>;

// Tag matching and wakeup; request_size bytes of every request are the backend's, set up
// by request_init when UCX allocates the request. transports, when not null, replaces
// UCX_TLS (the caller decides when that is right).
Status create_context(int expected_eps, int local_ranks, size_t request_size,
                      void (*request_init)(void*), const char* transports, UcpContext* out);
// Serialized mode: the group's mutex orders every call.
Status create_worker(ucp_context_h context, UcpWorker* out);
// The worker's address as bytes; empty on failure.
std::string worker_address(ucp_worker_h worker);
// The fd that becomes readable when the armed worker has events; -1 on failure.
int worker_event_fd(ucp_worker_h worker);

// UCX before 1.14 asserts in ucp_worker_destroy (openucx/ucx#8175) when a wireup reply to
// a peer that died is still queued, on an endpoint UCX opened itself when that peer
// connected to us, so the plugin cannot close it first. After a failure the group hands
// its worker and context here: kept, unreleased, until the process exits. False (and
// nothing taken) where ucp_worker_destroy is safe.
bool keep_failed_worker(UcpWorker& worker, UcpContext& context);

// Starts closing ep (force: without flushing it); the request to wait for, or null.
void* close_ep(ucp_ep_h ep, bool force);
// Progresses the worker until every request completed or `until`, then frees them all (UCX
// finishes those still running alone).
void finish_requests(ucp_worker_h worker, std::vector<void*> requests, Clock::time_point until);

// An epoll set of the worker's event fd, an eventfd other threads write to wake the thread
// blocked in wait(), and any other fds the group watches (peers' pidfds), each with a tag.
class Waker {
 public:
  Waker() = default;
  ~Waker();
  Waker(const Waker&) = delete;
  Waker& operator=(const Waker&) = delete;
  Status create(int worker_fd);
  // Watches fd for readability; wait() reports it by tag (>= 0). The caller owns fd.
  bool watch(int fd, int tag);
  void unwatch(int fd);
  // Blocks until an event or wake(), at most timeout_us (0: just look). Consumes a pending
  // wake(); appends the tags of ready watched fds to *ready.
  void wait(int64_t timeout_us, std::vector<int>* ready);
  void wake();

 private:
  bool add(int fd, uint64_t data);  // to the epoll set, for readability
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
};

// A pidfd: readable once the process has exited (Linux 5.3+). Closed on destruction.
class ProcessHandle {
 public:
  ProcessHandle() = default;
  ~ProcessHandle();
  ProcessHandle(const ProcessHandle&) = delete;
  ProcessHandle& operator=(const ProcessHandle&) = delete;
  // False if the process is already gone (*gone) or pidfds are unavailable.
  bool open(int pid, bool* gone);
  int fd() const { return fd_; }
  void reset();

 private:
  int fd_ = -1;
};

}  // namespace procgroup::ucx_backend

#endif  // PROCGROUP_BACKENDS_UCX_UCX_RESOURCES_H_
