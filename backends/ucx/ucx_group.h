// ucx_group.h — one procgroup group on its own UCP context and worker: rendezvous through
// the host store, endpoints, running operations, progress, failures.
//
//   std::shared_ptr<UcxGroup> g;
//   Status st = UcxGroup::create(*config, host, &g);  // collective: publishes the worker
//   std::shared_ptr<Work> w;                          // address, connects (lazily > 64)
//   st = g->submit(op, &w);            // validated, then started on this thread
//   pg_status_t s = w->wait(-1, &msg); // this thread drives progress while it waits
//   g->abort();                        // running works fail now with PG_ERR_ABORTED
//   g->shutdown();                     // group_destroy: goodbyes, endpoints closed
//
// Concurrency: one mutex orders every UCX call and all state (the worker runs in UCX's
// serialized mode). Operations are coroutines (ucx_task.h) started by the issuing thread
// and resumed by whoever polls the worker. Progress model (ucx_progress.cc):
// - a thread waiting on a work becomes the poller: it spins on ucp_worker_progress while
//   events keep coming (latency), and after PROCGROUP_UCX_SPIN_US without any it arms the
//   worker and sleeps in epoll on UCX's event fd (no core burnt on a slow peer);
// - a progress thread polls (blocking on the event fd, never spinning) only for operations
//   nobody waits on, and otherwise sleeps; it also ticks UCX's housekeeping and timeouts.
//   While callers keep waiting it stays off the mutex altogether (ucx_progress.cc).
// Failure model (ucx_failure.cc): a lost peer, a UCX error, a timeout, a collective's count
// mismatch or abort breaks the group: running works fail (PG_ERR_PEER_LOST / PG_ERR_BACKEND /
// PG_ERR_TIMEOUT / PG_ERR_MISMATCH, the same on the ranks a notice reaches; PG_ERR_ABORTED
// for abort), naming op, seq and peer; receives are cancelled, endpoints force-closed, the
// other ranks get a notice so they fail at once, later submissions fail fast. A recv of
// another size fails alone (the message was consumed whole).
#ifndef PROCGROUP_BACKENDS_UCX_UCX_GROUP_H_
#define PROCGROUP_BACKENDS_UCX_UCX_GROUP_H_

#include <ucp/api/ucp.h>

#include <atomic>
#include <condition_variable>
#include <coroutine>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "procgroup/procgroup_backend.h"
#include "ucx_algorithms.h"
#include "ucx_op.h"
#include "ucx_resources.h"
#include "ucx_shm.h"
#include "ucx_work.h"

namespace procgroup::ucx_backend {

// Kinds of control messages (ucx_failure.cc).
inline constexpr uint8_t kControlNotice = 1;
inline constexpr uint8_t kControlGoodbye = 2;
inline constexpr uint8_t kControlHello = 3;

// The group class of kit::make_ops (ucx_backend.cc builds the entries from it).
class UcxGroup : public std::enable_shared_from_this<UcxGroup> {
 public:
  static constexpr const char* kName = "ucx";
  static Status create(const pg_backend_group_config_t& config, const pg_host_services_t* host,
                       std::shared_ptr<UcxGroup>* out);
  ~UcxGroup();
  UcxGroup(const UcxGroup&) = delete;
  UcxGroup& operator=(const UcxGroup&) = delete;

  Status submit(const pg_backend_op_t& op, std::shared_ptr<Work>* out);
  void abort();
  // group_destroy: running works fail with PG_ERR_ABORTED, endpoints close, the progress
  // thread stops, UCX is released. Completed works stay valid.
  void shutdown();

  // ---- For Work ----
  // Drives progress until work is done or `until` (see the progress model above).
  void wait_for(const Work& work, Clock::time_point until);
  // One non-blocking poll, unless another thread is polling.
  void poll_for_test();

  // ---- For Io and algorithms (the mutex is held) ----
  const Tuning& tuning() const { return tuning_; }
  ShmWindows& shm() { return shm_; }
  bool broken() const { return broken_; }
  ucp_worker_h worker() const { return worker_.get(); }
  ucp_datatype_t reduce_datatype() const { return reduce_dt_; }
  // The endpoint to peer, connected on first use (receives connect too, so a failing peer
  // is reported). Fails once the group is broken, and for sends to a peer that has left.
  Status endpoint(int peer, bool for_send, ucp_ep_h* ep);
  void resume_later(Op* op, std::coroutine_handle<> h) { ready_.emplace_back(op, h); }
  // The op's last request completed: finish it if its coroutine has returned too.
  void requests_done(Op* op);
  std::byte* lease(Op& op, size_t bytes);
  // Sends UCX has not completed: some may wait in UCX's queue for room in a peer's FIFO,
  // which nobody signals when it frees, so the poller must not sleep long meanwhile.
  void count_sends(int delta) { sends_outstanding_ += delta; }

 private:
  UcxGroup(const pg_backend_group_config_t& config, const pg_host_services_t* host);
  Status connect();
  Status greet_peers();
  Status open_windows();
  Status connect_peer(int peer);
  Status fetch_address(int peer);  // into addresses_[peer]
  // The op's own timeout (clamped), else the group's.
  std::chrono::milliseconds op_timeout(const pg_backend_op_t& desc) const;
  void close_endpoints(bool force, Clock::time_point until);

  // ucx_progress.cc
  bool poll_once();
  void run_ready();
  void settle(Op* op);
  void finalize(Op* op);
  // Polls until the work (null: every running op) is done, `until`, or (progress thread)
  // a waiter wants the role. Returns whether it blocked in epoll at least once;
  // *first_idle gets the time of its first idle round (its first clock read), if any.
  bool poll_until(std::unique_lock<std::mutex>& lock, const Work* work, Clock::time_point until,
                  bool spin, Clock::time_point* first_idle = nullptr);
  void progress_loop();
  int64_t block_us(Clock::time_point now, Clock::time_point until) const;

  // ucx_peers.cc
  // A store call failed: the status as it came, and a message that blames the right one
  // (a timeout: `missing`, the peer's key never appeared; else the store on rank 0).
  // waited: how long a missing key was waited for (0: the group timeout).
  Status store_failure(pg_status_t st, const std::string& doing, const std::string& missing,
                       std::chrono::milliseconds waited = {}) const;
  Status discover_hosts();
  Status read_host(int peer);
  void watch_if_local(int peer);
  void watch_local_peers();
  void check_local_peers(int64_t timeout_us);
  void handle_exits();

  // ucx_failure.cc
  struct PeerArg {
    UcxGroup* group;
    int peer;
  };
  static void on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status);
  static void on_control(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                         void* user_data);
  void post_control_recv();
  void handle_control();
  void handle_peer_failures();
  void notify_peers(uint8_t kind, pg_status_t code, const std::string& text);
  void check_deadlines(Clock::time_point now);
  void break_group(pg_status_t code, const std::string& reason, bool tell_peers);
  std::string exit_cause(int peer) const;
  void abandon_running();
  void drain(Clock::time_point until);
  void log(int32_t level, const std::string& message) const;

  const pg_host_services_t* host_;
  const pg_host_store_t* store_;
  const int rank_;
  const int size_;
  const int local_size_;
  const std::chrono::milliseconds timeout_;
  const std::string group_id_;
  const std::string master_addr_;  // where the store listens (for messages)
  const Tuning tuning_;

  mutable std::mutex mu_;
  UcpContext context_;
  UcpWorker worker_;
  Waker waker_;
  bool wakeup_ = false;  // UCX gave us an event fd to sleep on
  ucp_err_handling_mode_t err_mode_ = UCP_ERR_HANDLING_MODE_PEER;
  // Generic, for receives that reduce (ucx_recv_reduce.h); 0 until made (never a datatype).
  ucp_datatype_t reduce_dt_ = 0;
  // Per peer, keyed by rank and made on first use: a group's memory follows the peers it
  // talks to, not its size (up to 2^22 ranks, most of them never met in a lazy group).
  template <typename T>
  using PerPeer = std::unordered_map<int, T>;
  bool endpoints_ready_ = false;  // connect() got as far as endpoints
  PerPeer<ucp_ep_h> eps_;
  PerPeer<std::string> addresses_;   // fetched lazily
  PerPeer<PeerArg> peer_args_;       // node-based: UCX keeps pointers to them
  PerPeer<uint8_t> departed_;        // said goodbye (destroyed its group)
  std::unordered_set<int> greeted_;  // said hello (connected to us)
  std::vector<std::pair<int, ucs_status_t>> failed_peers_;  // from ep error callbacks
  // Peers on this host: their pids and pidfds (readable once the process exited).
  bool one_host_ = false;
  std::string identity_;                // this host's (ucx_peers.cc)
  std::unordered_set<int> host_known_;  // peers whose identity was read
  PerPeer<int> pids_;                   // 0: not on this host (or unknown)
  PerPeer<ProcessHandle> processes_;
  int watched_peers_ = 0;
  std::vector<int> exited_;  // watched peers whose process ended, not yet handled
  // Peers that ended without a goodbye while nothing ran here: the next operation fails.
  std::vector<int> exited_idle_;

  // Shared-memory windows (one-host groups; declared before the ops that may use them).
  ShmWindows shm_;

  // Running operations and their scheduling.
  Op* ops_ = nullptr;
  int sends_outstanding_ = 0;
  uint64_t next_collective_ = 0;
  std::vector<std::pair<Op*, std::coroutine_handle<>>> ready_;
  std::vector<std::pair<Op*, std::coroutine_handle<>>> resuming_;
  std::vector<Op*> finalize_;
  std::vector<Op*> finalizing_;
  std::vector<std::unique_ptr<Op>> abandoned_;  // given up on while UCX may hold requests
  ScratchPool pool_;
  Clock::time_point next_deadline_check_{};

  // Control messages (notices, goodbyes).
  std::vector<char> control_buf_;
  void* control_request_ = nullptr;
  bool control_arrived_ = false;
  std::string notice_;  // the body of our own notice; must outlive its sends

  // Failure.
  bool broken_ = false;
  pg_status_t broken_code_ = PG_OK;
  std::string broken_cause_;
  Clock::time_point drain_until_{};

  // Progress coordination (see ucx_progress.cc).
  bool poller_active_ = false;
  int64_t spin_us_ = 0;  // adapted between 2 us and tuning_.spin_us (ucx_progress.cc)
  bool thread_polls_ = false;
  std::atomic<bool> want_poll_{false};
  std::atomic<bool> thread_blocked_{false};
  int sleeping_waiters_ = 0;
  Clock::time_point last_activity_{};
  std::condition_variable waiters_cv_;
  // The progress thread sleeps on thread_cv_ under thread_mu_, not mu_ (ucx_progress.cc).
  std::mutex thread_mu_;
  std::condition_variable thread_cv_;
  bool thread_kicked_ = false;  // under thread_mu_, as is thread_stop_
  bool thread_stop_ = false;
  std::atomic<bool> thread_idle_{false};      // asleep for want of work: a submission kicks it
  std::atomic<uint64_t> submits_{0};          // how a submission that just missed that shows
  std::atomic<int> waiting_{0};               // callers inside wait_for
  std::atomic<Clock::rep> last_wait_end_{0};  // when the last one left it
  enum class Kick { kIfIdle, kAlways, kStop };
  void kick_thread(Kick why);
  bool stopping_ = false;
  bool shut_down_ = false;
  std::thread progress_thread_;
};

}  // namespace procgroup::ucx_backend

#endif  // PROCGROUP_BACKENDS_UCX_UCX_GROUP_H_
