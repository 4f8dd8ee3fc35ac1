// A group: the state behind pg_group_t. It owns the backend group, the rendezvous store
// (shared with its subgroups), the fallback runner and the list of outstanding works.
// Failure model (DESIGN.md §6): the first fatal failure (timeout, lost peer, mismatch,
// backend error, abort) is recorded, the backend group is aborted so pending works end
// promptly, and every later call fails fast naming that first failure.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/fallback_runner.h"
#include "core/flight_recorder.h"
#include "core/hang_report.h"
#include "core/host_services.h"
#include "core/timeline.h"
#include "core/work.h"
#include "loader/loader.h"
#include "rendezvous/env.h"

namespace procgroup::detail {

class GroupState : public std::enable_shared_from_this<GroupState> {
 public:
  struct Members {
    int rank = 0;
    int size = 1;
    int local_rank = 0;
    int local_size = 1;
  };

  // What the backend is told about the job besides the members; subgroups inherit it.
  struct BackendHints {
    std::string master_addr;  // for the backend's choice of interface
    int device_type = -1;     // the user's hint; -1 none
  };

  // Debugging aids, shared by a world group and its subgroups.
  struct Diagnostics {
    bool debug_detail = false;           // PROCGROUP_DEBUG=detail
    std::string trace_dir;               // PROCGROUP_TRACE_DIR
    StoreConfig store;                   // for the hang report's own store connection
    std::shared_ptr<Store> user_store;   // the caller's store: the hang report uses it instead
    std::shared_ptr<Timeline> timeline;  // PROCGROUP_TIMELINE; null when off
    std::string timeout_source;          // where the group timeout came from (GroupConfig)
  };

  // The world group of a job (pg_group_create). With user_store (pg_group_create_with_store)
  // it rendezvous there instead of opening config.store_url.
  static Result<std::shared_ptr<GroupState>> create(
      const GroupConfig& config, const std::shared_ptr<Store>& user_store = nullptr);
  // Whether plugin starts here: a one-rank group of it on a private store, created and
  // destroyed at once (how the default backend is tried, default_backend.h).
  static Status try_alone(PluginRef plugin, const GroupConfig& config);
  // Collective over this group: see pg_group_split. Null when color is PG_SPLIT_NO_COLOR.
  Result<std::shared_ptr<GroupState>> split(int color, int key);

  ~GroupState();
  GroupState(const GroupState&) = delete;
  GroupState& operator=(const GroupState&) = delete;

  int rank() const { return members_.rank; }
  int size() const { return members_.size; }
  const std::string& id() const { return id_; }
  const Plugin& plugin() const { return *plugin_; }
  pg_backend_group_t backend_group() const { return backend_group_; }
  Millis timeout() const { return timeout_; }
  FallbackRunner& runner() { return runner_; }
  FlightRecorder& recorder() { return recorder_; }
  bool debug_detail() const { return diagnostics_.debug_detail; }
  // PROCGROUP_TIMELINE (null when off) and this group's track on it.
  Timeline* timeline() const { return diagnostics_.timeline.get(); }
  int timeline_track() const { return timeline_track_; }
  // Whether the backend takes CPU buffers; when not (nccl), the core's own metadata
  // exchanges go through store_allgather instead of a CPU collective.
  bool takes_cpu_buffers() const;
  // Collective: every rank's `mine` for round `index` of `purpose` (rounds numbered from 1,
  // called in the same order on every rank), through the rendezvous store, into `all`
  // (size() * mine.size() bytes, in rank order). A value of another size is PG_ERR_STORE.
  Status store_allgather(std::string_view purpose, uint64_t index, std::span<const uint8_t> mine,
                         std::span<uint8_t> all, Deadline deadline);

  // PG_ERR_ABORTED naming the first failure if the group has failed, else OK.
  Status check_not_failed();
  // check_not_failed(), and PG_ERR_INVALID_ARGUMENT once destroy() has begun.
  Status check_usable();
  // Records a work's failure; fatal ones abort the group, and the first timeout also
  // writes the hang report (hang_report.h) first. Returns the failure to report: the
  // first timeout's message gains the ranks this rank did not hear from (PG_ERR_MISMATCH
  // when every rank is in the same operation with different arguments).
  Status mark_failed(const Status& failure);
  // Aborts the backend group and fails pending emulated works. Idempotent.
  void abort(const Status& reason);
  // The message for an operation that ran past the group timeout.
  Status describe_timeout(const OpLabel& label) const;
  // An operation's end, for works and direct blocking calls alike: a failure fails the
  // group (mark_failed, which may restate it in status), then the flight recorder and the
  // timeline close its entries.
  void end_op(const OpLabel& label, uint64_t trace_id, const OpTrace& trace, Status& status);

  // A blocking call in progress with no tracked work (dispatch.cc): destroy() waits for
  // every one to leave. False, with nothing entered, once the group is failed or being
  // destroyed: the caller then takes the tracked path, which says why.
  bool enter_blocking();
  void leave_blocking();

  // Collective sequence numbers, from 1, equal across ranks.
  uint64_t next_seq() { return ++seq_; }
  // Remembers a work so destroy() can wait for it; native works also order later
  // emulated ones (see pending_native_works).
  void track(const std::shared_ptr<WorkState>& work, bool native);
  // Keeps a work whose handle was released while pending alive until it completes
  // (procgroup.h: a released work is detached and still completes).
  void detach(std::shared_ptr<WorkState> work);
  // Native works still outstanding, which an emulated op must wait for before it starts.
  std::vector<std::shared_ptr<WorkState>> pending_native_works();

  // Waits for outstanding works, destroys the backend group and, for a world group,
  // keeps rank 0's store serving until every rank has left (bounded by the timeout).
  Status destroy();

 private:
  // A member's side of a split the backend makes itself (Plugin::group_split).
  struct SplitFrom {
    pg_backend_group_t parent;
    int color;
    int key;
  };

  GroupState(std::string id, Members members, Millis timeout, PluginRef plugin,
             std::shared_ptr<Store> root_store, bool owns_store, Diagnostics diagnostics,
             BackendHints hints);
  // The backend group, from group_create, or from the parent's group through the plugin's
  // group_split when `from` is given: the same config either way (procgroup_backend.h).
  Status create_backend_group(const SplitFrom* from = nullptr);
  // A PG_SPLIT_NO_COLOR rank's part in a split the backend makes itself (split.cc).
  Status split_without_color(int key);

  const std::string id_;
  const Members members_;
  const Millis timeout_;
  PluginRef plugin_;
  std::shared_ptr<Store> root_store_;  // shared with subgroups; rank 0's hosts the server
  const bool owns_store_;              // a world group: runs the leave protocol
  std::unique_ptr<HostStore> host_store_;
  pg_backend_group_t backend_group_ = nullptr;
  FallbackRunner runner_;
  const Diagnostics diagnostics_;
  const BackendHints hints_;
  int timeline_track_ = 0;
  FlightRecorder recorder_{64};
  std::atomic<bool> hang_reported_{false};
  std::atomic<bool> saw_mismatch_{false};  // an operation failed with PG_ERR_MISMATCH
  std::atomic<uint64_t> seq_{0};
  std::atomic<uint64_t> splits_{0};

  std::mutex mutex_;  // never held while calling into a WorkState or the backend
  std::optional<Status> failure_;
  bool aborted_ = false;
  bool destroyed_ = false;
  // Set (under mutex_) once failure_ or destroyed_ is: the checks on every operation's
  // path read it without the lock while the group is healthy.
  std::atomic<bool> troubled_{false};
  struct Tracked {
    std::weak_ptr<WorkState> work;
    bool native;  // submitted to the backend (not emulated): orders later emulated ones
  };
  std::vector<Tracked> works_;  // one list, one weak reference per work
  std::vector<std::shared_ptr<WorkState>> detached_;
  std::atomic<int> blocking_calls_{0};  // entered and not yet left
};

// enter_blocking() .. leave_blocking() for one scope.
class BlockingCall {
 public:
  explicit BlockingCall(GroupState& group) : group_(group), entered_(group.enter_blocking()) {}
  ~BlockingCall() {
    if (entered_) group_.leave_blocking();
  }
  BlockingCall(const BlockingCall&) = delete;
  BlockingCall& operator=(const BlockingCall&) = delete;
  bool entered() const { return entered_; }

 private:
  GroupState& group_;
  const bool entered_;
};

}  // namespace procgroup::detail
