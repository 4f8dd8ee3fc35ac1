// gloo_group.h — one procgroup group on a Gloo TCP context: rendezvous, a worker thread
// that runs operations in issue order, waiter threads for send/recv, works, abort.
//
//   std::unique_ptr<GlooGroup> g;
//   Status st = GlooGroup::create(*config, host, &g);   // collective: all ranks rendezvous
//   std::shared_ptr<Work> w;
//   st = g->submit(op, &w);                              // validated here, run in order
//   std::string msg;
//   pg_status_t s = w->wait(1000, &msg);                 // PG_OK, PG_PENDING or the error
//   g->abort();                                          // pending works end PG_ERR_ABORTED
//   g.reset();                                           // joins the threads
//
// Failure model: a timeout, a lost connection or any other failure of a started operation
// fails that work with its own status and breaks the group: Gloo's connections are shut
// (so the peers notice at once instead of at their timeout) and every queued or later
// work fails with PG_ERR_ABORTED naming the first failure.
#ifndef PROCGROUP_BACKENDS_GLOO_GLOO_GROUP_H_
#define PROCGROUP_BACKENDS_GLOO_GLOO_GROUP_H_

#include <gloo/rendezvous/context.h>
#include <gloo/transport/device.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gloo_ops.h"
#include "gloo_p2p.h"
#include "gloo_work.h"
#include "procgroup/procgroup_backend.h"

namespace procgroup::gloo_backend {

// The group class of kit::make_ops (gloo_backend.cc builds the entries from it).
class GlooGroup {
 public:
  static constexpr const char* kName = "gloo";
  // Connects the full mesh through config.store; blocks up to config.timeout_ms.
  static Status create(const pg_backend_group_config_t& config, const pg_host_services_t* host,
                       std::unique_ptr<GlooGroup>* out);
  // Works still queued or running end with PG_ERR_ABORTED; the threads are joined.
  ~GlooGroup();
  GlooGroup(const GlooGroup&) = delete;
  GlooGroup& operator=(const GlooGroup&) = delete;

  // Validates op and queues it behind every operation issued before it.
  Status submit(const pg_backend_op_t& op, std::shared_ptr<Work>* out);
  // Fails queued and running works with PG_ERR_ABORTED and every later submission.
  void abort() { break_group(PG_ERR_ABORTED, "group_abort was called"); }

 private:
  GlooGroup(const pg_backend_group_config_t& config, const pg_host_services_t* host);
  Status connect(const pg_backend_group_config_t& config);

  void worker_loop();
  void waiter_loop();
  void execute(const std::shared_ptr<Work>& work);
  void wait_p2p(const std::shared_ptr<Work>& work);

  // Classifies an exception thrown while running work.
  Status failure_of(const Work& work, const std::exception_ptr& error) const;
  // Completes work with a failure and breaks the group.
  void fail(const std::shared_ptr<Work>& work, Status status);
  // Marks the group broken (first cause wins), shuts Gloo's pairs, fails queued works.
  void break_group(pg_status_t status, const std::string& cause);
  // Fails every Gloo pair of the context: wakes all waits in Gloo, tells the peers.
  void shut_pairs();
  // The rank whose pair holds gloo_message as its error (-1: none); *down gets every rank
  // whose connection has failed by now.
  int failed_peer(const std::string& gloo_message, std::vector<int>* down) const;
  void log(int32_t level, const std::string& message) const;

  const pg_host_services_t* host_;
  const int rank_;
  const int size_;
  const std::chrono::milliseconds timeout_;
  AllreduceChoice allreduce_ = AllreduceChoice::kAuto;

  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  // Touched by the worker thread only (collectives run there, one at a time); a failed
  // operation breaks the group, so no later one can find Gloo still writing into it.
  Scratch scratch_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable wait_cv_;
  std::deque<std::shared_ptr<Work>> queue_;       // issued, not started
  std::deque<std::shared_ptr<Work>> p2p_posted_;  // posted, no waiter yet
  size_t running_ = 0;                            // works started and not finished
  size_t idle_waiters_ = 0;
  uint32_t next_tag_ = 0;
  RecvOrder recv_order_;
  bool stopping_ = false;
  bool broken_ = false;
  std::string broken_cause_;
  std::thread worker_;
  std::vector<std::thread> waiters_;
};

}  // namespace procgroup::gloo_backend

#endif  // PROCGROUP_BACKENDS_GLOO_GLOO_GROUP_H_
