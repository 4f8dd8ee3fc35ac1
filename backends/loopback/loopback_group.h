// The loopback backend's group: the state its ranks (threads of one process) share, and
// each rank's handle with its worker thread.
//
// All ranks of a group hold one SharedGroup, found through a process-wide registry at
// rendezvous. One mutex guards it; data is copied outside the lock. A collective is
// numbered per rank (the k-th collective issued there) rather than by the core's seq,
// because send/recv consume seq numbers unevenly across ranks. The protocol for
// collective k on rank r (see run_task):
//   post     slots[r].posted = k, slots[r].desc = what r contributes; wait for every rank
//            to post k (or the deadline: then the whole group fails with PG_ERR_TIMEOUT)
//   commit   check that all ranks agree (else PG_ERR_MISMATCH on every rank); committed = k
//   compute  read peers' buffers directly, without the lock
//   finish   finished = k; wait until every rank has finished k, so no peer still reads
//            our input once our work completes; then copy out in-place results
// A failed group (abort, timeout) lets no rank commit any more, and every exit still waits
// for the ranks that did commit to finish reading.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "procgroup/procgroup_backend.h"
#include "procgroup/procgroup_backend_kit.hpp"

namespace procgroup::loopback {

using kit::Clock;
using kit::deadline_after;  // now + ms, saturated at kNever
using kit::kNever;
using kit::Status;

// A work is the kit's completion record (complete() counts once: an abort and a late success
// may race), shared by the caller's handle and whoever finishes it (a rank's worker, or the
// peer thread that matches a recv): the caller may release its handle while it is pending.
// It holds no pointer into the group, so it can be tested and released after the group is gone.
using Work = kit::Completion;
using WorkRef = std::shared_ptr<Work>;

#if defined(PG_LOOPBACK_P2P_ONLY) && PG_LOOPBACK_P2P_ONLY
inline constexpr bool kP2pOnly = true;
#else
inline constexpr bool kP2pOnly = false;
#endif

// ---- Collectives (loopback_ops.cc) ----------------------------------------------

// One rank's collective: its plan says what this rank contributes (plan.in, read by peers)
// and where its result goes (plan.out), with the in-place forms resolved.
struct OpDesc {
  pg_op_t op = PG_OP_BARRIER;
  pg_reduce_op_t reduce_op = PG_REDUCE_SUM;
  int32_t root = 0;
  uint64_t seq = 0;  // the core's sequence number, for messages only
  kit::Plan plan;    // in_place: the result overwrites plan.in: compute into a temporary
};

// A collective's desc for this rank: its plan, and the root and reduce op where it has them.
OpDesc collective_desc(const pg_backend_op_t& op, const kit::Plan& plan);
// "allreduce(f32 x 1024, sum)", "broadcast(f32 x 8, root 2)", ...
std::string describe(const OpDesc& desc);
// PG_OK when every rank called the same collective; else PG_ERR_MISMATCH naming the first
// rank that differs from rank 0. Every rank computes the same answer.
Status check_agreement(std::span<const OpDesc> all);
// Computes rank's result from every rank's desc. In-place results go to *temp; the
// caller copies them to plan.out once no peer reads plan.in any more.
Status compute_collective(const pg_host_services_t* host, int rank, std::span<const OpDesc> all,
                          std::vector<std::byte>* temp);

// ---- Shared state ---------------------------------------------------------------

struct Task {
  WorkRef work;
  OpDesc desc;
  Clock::time_point deadline;
  uint64_t index = 0;  // this rank's collective number, from 1
};

struct Slot {
  bool joined = false;
  uint64_t splits = 0;    // group_split calls on this rank
  bool stopping = false;  // the rank is being destroyed: its worker drains and exits
  uint64_t issued = 0;    // collectives issued on this rank
  uint64_t posted = 0;    // see the protocol above
  uint64_t committed = 0;
  uint64_t finished = 0;
  OpDesc desc;             // of the collective `posted`
  std::deque<Task> queue;  // issued, not yet run by the worker
  int deliveries = 0;      // peer threads copying into this rank's recv buffers now
};

struct P2pKey {
  int dst;
  int src;
  uint64_t tag;
  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy misreads the defaulted <=>
  auto operator<=>(const P2pKey&) const = default;
};

struct PendingRecv {
  WorkRef work;
  void* data = nullptr;
  uint64_t bytes = 0;
  uint64_t seq = 0;
  Clock::time_point deadline;
  int64_t timeout_ms = 0;
};

// ---- group_split (loopback_split.cc) ----------------------------------------------

// One rank's group_split call, as every rank of the parent sees it.
struct SplitRequest {
  int32_t color = PG_SPLIT_NO_COLOR;
  int32_t key = 0;
  bool has_config = false;
  int32_t rank = -1;  // the child rank and size the core computed (has_config)
  int32_t size = 0;
  std::string group_id;
  std::string problem;  // what is wrong with this rank's own arguments; "" when nothing
};

struct SharedGroup;

// The k-th split of a group: every rank's request and the children made from it.
struct SplitRound {
  explicit SplitRound(int n) : requests(n) {}
  std::vector<std::optional<SplitRequest>> requests;  // empty until that rank posts
  int finished = 0;  // ranks done with the round; the last one removes it
  std::map<int32_t, std::shared_ptr<SharedGroup>> children;  // by color
};

struct SharedGroup {
  SharedGroup(std::string id, int n, uint64_t registry_key)
      : group_id(std::move(id)), size(n), instance(registry_key), slots(n) {}

  // Marks the group failed: queued collectives and pending recvs of every rank fail now,
  // workers wake up, and nothing new starts. index: the collective that timed out (0: none).
  void fail_locked(pg_status_t status, std::string message, uint64_t index);
  // What a work fails with once the group has failed. index: the collective the work had
  // posted and was waiting in (0: none); waiting in the one that timed out is a timeout.
  Status failure_for(uint64_t index) const;

  std::mutex mu;
  std::condition_variable cv;
  const std::string group_id;
  const int size;
  const uint64_t instance;  // registry key
  int alive = 0;            // handles not yet destroyed (including failed joins in progress)
  bool abandoned = false;   // rendezvous gave up; late ranks must not join
  std::vector<Slot> slots;
  bool failed = false;
  pg_status_t fail_status = PG_OK;
  std::string fail_message;
  uint64_t fail_index = 0;
  // Eagerly copied sends not yet received, and recvs posted before their send.
  std::map<P2pKey, std::deque<std::vector<uint8_t>>> messages;
  std::map<P2pKey, std::deque<PendingRecv>> recvs;
  std::map<uint64_t, SplitRound> splits;  // by split number, until every rank is done
};

// ---- One rank's handle (the pg_backend_group_t) ---------------------------------

// The group class of kit::make_ops (procgroup_backend_kit.hpp builds the entries from it).
class RankGroup {
 public:
  static constexpr const char* kName = kP2pOnly ? "loopback_p2p" : "loopback";
  // Joins the group (waiting for every rank), starts the worker; the kit checked config.
  static Status create(const pg_backend_group_config_t& config, const pg_host_services_t* host,
                       std::unique_ptr<RankGroup>* out);
  // group_split: collective over every rank of this group, in the same order everywhere
  // (procgroup_backend.h). The child is made from this group's state, without the store;
  // a rank with PG_SPLIT_NO_COLOR takes part and gets no child (*out stays NULL).
  Status split(int32_t color, int32_t key, const pg_backend_group_config_t* config,
               std::unique_ptr<RankGroup>* out);

  // Drains this rank's queue, joins the worker, fails its unmatched recvs, leaves the group.
  void shutdown();
  void abort();
  Status submit(const pg_backend_op_t& op, WorkRef* work);

 private:
  RankGroup(std::shared_ptr<SharedGroup> shared, int rank, int64_t timeout_ms,
            const pg_host_services_t* host)
      : shared_(std::move(shared)), rank_(rank), timeout_ms_(timeout_ms), host_(host) {}
  // The handle of a rank that has joined `shared`, with its worker started; on failure
  // the rank leaves again and the group fails.
  static Status launch(std::shared_ptr<SharedGroup> shared, int rank, int64_t timeout_ms,
                       const pg_host_services_t* host, std::unique_ptr<RankGroup>* out);
  void submit_collective(const pg_backend_op_t& op, const kit::Plan& plan, const WorkRef& work);
  void submit_send(const pg_backend_op_t& op, const kit::Plan& plan, const WorkRef& work);
  void submit_recv(const pg_backend_op_t& op, const kit::Plan& plan, const WorkRef& work);
  int64_t timeout_of(const pg_backend_op_t& op) const {
    return op.timeout_ms > 0 ? op.timeout_ms : timeout_ms_;
  }
  void worker_main();
  void run_task(std::unique_lock<std::mutex>& lock, Task& task);
  // Waits on the group's condition until pred() or deadline, meanwhile failing this
  // rank's recvs whose deadline passed. Returns pred().
  template <class Pred>
  bool wait_locked(std::unique_lock<std::mutex>& lock, Clock::time_point deadline, Pred pred);
  // Fails this rank's expired recvs (loopback_p2p.cc); returns the next recv deadline.
  Clock::time_point sweep_recvs_locked();
  // Copies a send's payload into a matched recv and completes both (lock not held).
  void deliver(PendingRecv& recv, const void* data, uint64_t bytes, Work* send_work,
               const P2pKey& key);
  void leave();

  std::shared_ptr<SharedGroup> shared_;
  const int rank_;
  const int64_t timeout_ms_;
  const pg_host_services_t* const host_;
  std::thread worker_;
};

// ---- Helpers --------------------------------------------------------------------

// "0, 2, 3": the ranks below size for which missing(rank) holds, for messages.
template <class Pred>
std::string rank_list(int size, Pred missing) {
  std::string s;
  for (int r = 0; r < size; ++r)
    if (missing(r)) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

}  // namespace procgroup::loopback
