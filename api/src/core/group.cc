#include "core/group.h"

#include <algorithm>

#include "common/log.h"
#include "core/default_backend.h"
#include "core/plugin_call.h"
#include "core/store_registry.h"

namespace procgroup::detail {
namespace {

// How long rank 0 keeps the store up after a failure for the others' hang reports (one
// report needs about 1 s, 3 s when it waits for a stopped rank 0).
constexpr Millis kFailedLeaveGrace{3000};

// Failures after which the group's collectives can no longer be trusted. A mismatch is
// not one: it is caught before the mismatched operation runs (PROCGROUP_DEBUG=detail, or
// by the backend's own agreement check), so every rank's backend is still in step.
bool is_fatal(pg_status_t code) {
  switch (code) {
    case PG_ERR_TIMEOUT:
    case PG_ERR_PEER_LOST:
    case PG_ERR_ABORTED:
    case PG_ERR_BACKEND:
    case PG_ERR_INTERNAL: return true;
    default: return false;
  }
}

// Drops released works, but only when the list has reached a power of two: amortised
// O(1) per tracked work, and the list stays within twice the live works.
template <class T>
void prune_if_grown(std::vector<T>& list) {
  const size_t n = list.size();
  if (n < 64 || (n & (n - 1)) != 0) return;
  std::erase_if(list, [](const T& t) { return t.work.expired(); });
}

}  // namespace

GroupState::GroupState(std::string id, Members members, Millis timeout, PluginRef plugin,
                       std::shared_ptr<Store> root_store, bool owns_store, Diagnostics diagnostics,
                       BackendHints hints)
    : id_(std::move(id)),
      members_(members),
      timeout_(timeout),
      plugin_(std::move(plugin)),
      root_store_(std::move(root_store)),
      owns_store_(owns_store),
      runner_(id_),
      diagnostics_(std::move(diagnostics)),
      hints_(std::move(hints)) {
  if (diagnostics_.timeline) timeline_track_ = diagnostics_.timeline->add_track(id_);
}

GroupState::~GroupState() {
  // destroy() is the normal path; this covers a failed creation or a leaked handle.
  runner_.stop();
  if (backend_group_ != nullptr) {
    Status ignored = call_plugin(plugin_->name, "group_destroy",
                                 [&] { return plugin_->ops->group_destroy(backend_group_); });
    (void)ignored;
  }
}

Result<std::shared_ptr<GroupState>> GroupState::create(const GroupConfig& config,
                                                       const std::shared_ptr<Store>& user_store) {
  set_log_rank(config.rank);  // before the loader's lines
  std::shared_ptr<Timeline> timeline;
  if (!config.timeline_path.empty()) {
    PG_ASSIGN_OR_RETURN(timeline, Timeline::create(config.timeline_path, config.rank));
  }
  PG_ASSIGN_OR_RETURN(BackendCandidate candidate, prepare_backend(config));
  StoreConfig store_config{config.store_url, config.rank, config.size, config.store_token,
                           config.timeout};
  // The caller's store is theirs to keep alive: no registry, no leave protocol for it.
  GroupStore opened_store{user_store, config.name};
  if (!user_store) {
    auto opened = open_group_store(store_config, config.name);
    if (!opened.ok())
      return opened.status().with_context(fmt::format("creating group '{}' (rank {} of {})",
                                                      config.name, config.rank, config.size));
    opened_store = std::move(opened.value());
  }
  auto [store, group_id] = std::move(opened_store);
  // Before the backend connects: ranks on other backends, or with PROCGROUP_DEBUG on one
  // side only, would otherwise hang there or in their first collective.
  auto agreed = agree_on_backend(std::move(candidate), config, *store,
                                 fmt::format("pg/{}/core/settings/", group_id));
  if (!agreed.ok())
    return agreed.status().with_context(
        fmt::format("creating group '{}' (rank {} of {})", config.name, config.rank, config.size));
  BackendChoice choice = std::move(agreed.value());
  Members members{config.rank, config.size, config.local_rank, config.local_size};
  Diagnostics diagnostics{config.debug_detail, config.trace_dir,    store_config,
                          user_store,          std::move(timeline), config.timeout_source};
  std::shared_ptr<GroupState> group(
      new GroupState(group_id, members, config.timeout, choice.plugin, store, !user_store,
                     std::move(diagnostics), BackendHints{config.master_addr, config.device_type}));
  PG_RETURN_IF_ERROR(explain_default(group->create_backend_group(), choice));
  log(kLogInfo, "core", "group '{}' rank {}/{} on backend '{}' (ranks from {})", config.name,
      config.rank, config.size, group->plugin().name, config.launcher);
  return group;
}

Status GroupState::create_backend_group(const SplitFrom* from) {
  host_store_ = std::make_unique<HostStore>(
      make_prefix_store(root_store_, fmt::format("pg/{}/backend/", id_)), timeout_);
  pg_backend_group_config_t config{};
  config.struct_size = sizeof(config);
  config.rank = members_.rank;
  config.size = members_.size;
  config.local_rank = members_.local_rank;
  config.local_size = members_.local_size;
  config.device_type = hints_.device_type;
  config.timeout_ms = timeout_.count();
  config.store = host_store_->c_store();
  config.group_id = id_.c_str();
  config.master_addr = hints_.master_addr.c_str();
  config.host = host_services();  // plugins built before the field ignore it
  const char* entry = from != nullptr ? "group_split" : "group_create";
  Status status = call_plugin(plugin_->name, entry, [&] {
    return from != nullptr ? plugin_->group_split(from->parent, from->color, from->key, &config,
                                                  &backend_group_)
                           : plugin_->ops->group_create(&config, &backend_group_);
  });
  if (status.ok() && backend_group_ == nullptr)
    status = make_error(PG_ERR_BACKEND, "backend '{}' {} returned no group", plugin_->name, entry);
  if (status.code() == PG_ERR_STORE || status.code() == PG_ERR_AUTH) {
    // The plugin's words say which key it wanted; the store's say where and why.
    std::string store_said = host_store_->last_failure();
    if (!store_said.empty() && status.message().find(store_said) == std::string::npos)
      status =
          Status(status.code(), fmt::format("{} (the store: {})", status.message(), store_said));
  }
  return status.with_context(fmt::format("creating group '{}' (rank {} of {}) on backend '{}'{}",
                                         id_, members_.rank, members_.size, plugin_->name,
                                         from != nullptr ? " with group_split" : ""));
}

Status GroupState::check_not_failed() {
  if (!troubled_.load(std::memory_order_acquire)) return ok_status();
  std::lock_guard lock(mutex_);
  if (failure_)
    return make_error(PG_ERR_ABORTED, "group '{}' failed earlier: {}", id_, failure_->to_string());
  return ok_status();
}

Status GroupState::check_usable() {
  if (!troubled_.load(std::memory_order_acquire)) return ok_status();
  {
    std::lock_guard lock(mutex_);
    if (destroyed_) return make_error(PG_ERR_INVALID_ARGUMENT, "group '{}' was destroyed", id_);
  }
  return check_not_failed();
}

Status GroupState::mark_failed(const Status& failure) {
  if (failure.code() == PG_ERR_MISMATCH) saw_mismatch_.store(true);
  if (!is_fatal(failure.code())) return failure;
  bool first;
  {
    std::lock_guard lock(mutex_);
    first = !failure_.has_value();
  }
  // A timeout here, or the first news of the group's failure arriving as an abort (a
  // backend passing on another rank's timeout): either way a rank hung somewhere, and this
  // rank's record belongs in the picture. (pg_group_abort records its failure first.) Not
  // after a mismatch: a backend that broke its group over one (ucx) explains the abort.
  const bool hung = failure.code() == PG_ERR_TIMEOUT ||
                    (failure.code() == PG_ERR_ABORTED && first && !saw_mismatch_.load());
  Status reason = failure;
  // Built only by the rank that reports: most fatal failures need none.
  const auto context = [this] {
    return HangContext{id_,
                       members_.rank,
                       members_.size,
                       diagnostics_.store,
                       diagnostics_.user_store,
                       diagnostics_.trace_dir};
  };
  if (!hung && first && failure.code() == PG_ERR_PEER_LOST && !hang_reported_.exchange(true)) {
    publish_hang_state(context(), recorder_);  // the lost peer may be one that timed out
  }
  if (hung && !hang_reported_.exchange(true)) {
    HangFindings findings = report_hang(context(), recorder_);
    if (findings.mismatch) {
      reason = Status(
          PG_ERR_MISMATCH,
          failure.message() + "; the ranks called it with different arguments: " + findings.behind);
    } else if (!findings.behind.empty()) {
      reason = Status(failure.code(), failure.message() + "; " + findings.behind);
    }
  }
  abort(reason);
  return reason;
}

void GroupState::abort(const Status& reason) {
  {
    std::lock_guard lock(mutex_);
    if (!failure_) failure_ = reason;
    troubled_.store(true, std::memory_order_release);
    if (aborted_) return;
    aborted_ = true;
  }
  log(kLogWarn, "core", "group '{}' rank {}: aborting: {}", id_, members_.rank, reason.to_string());
  if (backend_group_ != nullptr) {
    Status ignored = call_plugin(plugin_->name, "group_abort",
                                 [&] { return plugin_->ops->group_abort(backend_group_); });
    (void)ignored;
  }
}

Status GroupState::describe_timeout(const OpLabel& label) const {
  // Name the setting that gave the timeout: the operation's own, else the group's.
  const int64_t op_timeout = label.args.options.timeout_ms;
  const std::string which =
      op_timeout > 0 ? fmt::format("its timeout of {} ms (pg_op_options_t.timeout_ms)", op_timeout)
                     : fmt::format("the group timeout of {} ms (from {})", timeout_.count(),
                                   diagnostics_.timeout_source.empty()
                                       ? "pg_group_options_t.timeout_ms or PROCGROUP_TIMEOUT"
                                       : diagnostics_.timeout_source);
  return make_error(PG_ERR_TIMEOUT,
                    "{} on group '{}' (rank {} of {}) did not complete within {}; some rank did "
                    "not join it or is stuck; the group is aborted",
                    label.to_string(), id_, members_.rank, members_.size, which);
}

void GroupState::end_op(const OpLabel& label, uint64_t trace_id, const OpTrace& trace,
                        Status& status) {
  // Before the recorder closes the entry, so a hang report shows it still running.
  if (!status.ok()) status = mark_failed(status);
  if (trace_id != 0) recorder_.finish(trace_id, status.code());
  if (trace.on()) trace_op_ended(timeline(), trace, label, id_, status);
}

// The counter and troubled_ are both sequentially consistent: a call entering while
// destroy() begins either sees troubled_ or is seen by destroy()'s wait.
bool GroupState::enter_blocking() {
  blocking_calls_.fetch_add(1);
  if (!troubled_.load()) return true;
  leave_blocking();
  return false;
}

void GroupState::leave_blocking() {
  if (blocking_calls_.fetch_sub(1) == 1 && troubled_.load()) blocking_calls_.notify_all();
}

void GroupState::track(const std::shared_ptr<WorkState>& work, bool native) {
  std::lock_guard lock(mutex_);
  prune_if_grown(works_);
  works_.push_back(Tracked{work, native});
}

void GroupState::detach(std::shared_ptr<WorkState> work) {
  // done() takes the work's lock, and a completing work takes ours: never both at once.
  std::vector<std::shared_ptr<WorkState>> kept;
  {
    std::lock_guard lock(mutex_);
    if (destroyed_) return;
    kept.swap(detached_);
  }
  std::erase_if(kept, [](const std::shared_ptr<WorkState>& w) { return w->done(); });
  kept.push_back(std::move(work));
  std::lock_guard lock(mutex_);
  detached_.insert(detached_.end(), std::make_move_iterator(kept.begin()),
                   std::make_move_iterator(kept.end()));
}

std::vector<std::shared_ptr<WorkState>> GroupState::pending_native_works() {
  std::vector<std::shared_ptr<WorkState>> pending;
  std::lock_guard lock(mutex_);
  for (const Tracked& t : works_)
    if (auto work = t.native ? t.work.lock() : nullptr) pending.push_back(std::move(work));
  return pending;
}

Status GroupState::destroy() {
  std::vector<std::shared_ptr<WorkState>> outstanding;
  {
    std::lock_guard lock(mutex_);
    if (destroyed_) return make_error(PG_ERR_INVALID_ARGUMENT, "group '{}' destroyed twice", id_);
    destroyed_ = true;
    troubled_.store(true);  // seq_cst: see enter_blocking
    for (const Tracked& t : works_)
      if (auto work = t.work.lock()) outstanding.push_back(std::move(work));
    works_.clear();
  }
  // Detached works are among the outstanding ones (detached_ keeps them alive).
  for (auto& work : outstanding) work->finish_before_group_destroy();
  // Blocking calls end by their own deadline, as the works do.
  for (int calls = blocking_calls_.load(); calls != 0; calls = blocking_calls_.load())
    blocking_calls_.wait(calls);
  {
    std::lock_guard lock(mutex_);
    detached_.clear();
  }
  runner_.stop();
  Status status = call_plugin(plugin_->name, "group_destroy",
                              [&] { return plugin_->ops->group_destroy(backend_group_); });
  backend_group_ = nullptr;
  if (Timeline* timeline = diagnostics_.timeline.get()) {
    Status written = timeline->flush();  // now, not when the last reference goes
    if (!written.ok()) log(kLogWarn, "timeline", "PROCGROUP_TIMELINE: {}", written.to_string());
  }
  if (owns_store_ && members_.size > 1) {
    // Rank 0 hosts the store: it must outlive every rank's use of it, so ranks announce
    // their leave and rank 0 waits for all (not long if the group already failed).
    bool failed;
    {
      std::lock_guard lock(mutex_);
      failed = failure_.has_value();
    }
    std::string key = fmt::format("pg/{}/core/left", id_);
    auto left = root_store_->add(key, 1);
    if (left.ok() && *left == members_.size) {
      Status ignored = root_store_->set(key + "/all", std::vector<uint8_t>{1});
      (void)ignored;
    }
    if (members_.rank == 0 && left.ok()) {
      // After a failure the others may still be writing their hang reports (which turn a
      // timeout into a mismatch or a summary naming who is behind): give them a few
      // seconds, not a whole timeout, since some may be dead and never leave.
      const Millis grace = failed ? std::min(timeout_, kFailedLeaveGrace) : timeout_;
      std::vector<std::string> keys{key + "/all"};
      Status waited = root_store_->wait(keys, grace);
      if (!waited.ok() && !failed)
        log(kLogWarn, "core", "group '{}': not every rank left cleanly: {}", id_,
            waited.to_string());
    }
  }
  return status;
}

}  // namespace procgroup::detail
