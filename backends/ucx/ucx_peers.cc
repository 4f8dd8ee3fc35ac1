// Peers on this host: finding them through the store, and noticing when one's process ends
// (pidfds in the group's epoll set), since UCX's shared-memory transports cannot report a
// dead peer themselves.
//
// Each rank publishes "ucx/host/<rank>" = "<host identity>\n<pid>". The identity (host name,
// boot id, IPC and PID namespaces) says whether shared memory reaches the peer and whether
// its pid means the same process here.
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "ucx_group.h"

namespace procgroup::ucx_backend {
namespace {

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string link_of(const char* path) {
  char target[128] = {};
  const ssize_t n = ::readlink(path, target, sizeof(target) - 1);
  return n > 0 ? std::string(target, static_cast<size_t>(n)) : std::string();
}

std::string host_identity() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return std::string(host) + "/" + first_line("/proc/sys/kernel/random/boot_id") + "/" +
         link_of("/proc/self/ns/ipc") + "/" + link_of("/proc/self/ns/pid");
}

std::string host_key(int rank) { return "ucx/host/" + std::to_string(rank); }

constexpr auto kGoodbyeGrace = std::chrono::milliseconds(200);

}  // namespace

Status UcxGroup::store_failure(pg_status_t st, const std::string& doing, const std::string& missing,
                               std::chrono::milliseconds waited) const {
  // A key that never appeared is the peer's fault; any other failure is the store's, which
  // rank 0 hosts: blaming the peer whose key we wanted would send the user the wrong way.
  if (st == PG_ERR_TIMEOUT && !missing.empty()) {
    const auto ms = waited.count() > 0 ? waited.count() : timeout_.count();
    return Status::error(
        st, missing + " within " + std::to_string(ms) + " ms (not started, stuck, or dead)");
  }
  const std::string store = "the store at " + master_addr_ + " (hosted by rank 0)";
  std::string why;
  switch (st) {
    case PG_ERR_STORE: why = store + " went away or cannot be reached: is rank 0 alive?"; break;
    case PG_ERR_AUTH: why = store + " refused this rank's PROCGROUP_STORE_TOKEN"; break;
    case PG_ERR_TIMEOUT: why = store + " did not answer in time"; break;
    default: why = store + " failed with status " + std::to_string(st); break;
  }
  return Status::error(st, doing + " failed: " + why);
}

Status UcxGroup::discover_hosts() {
  identity_ = host_identity();
  const std::string value = identity_ + "\n" + std::to_string(::getpid());
  if (const Status set = kit::Store(store_).set(host_key(rank_), value); !set.ok()) {
    return store_failure(set.code, "publishing this rank's host identity", "");
  }
  // Above connect_all_max, reading every identity would cost size store reads per rank: such
  // groups trust the launcher's LOCAL_WORLD_SIZE and look a peer up when first connecting.
  if (size_ > tuning_.connect_all_max) {
    one_host_ = local_size_ == size_;
    return {};
  }
  one_host_ = true;
  for (int i = 0; i < size_; ++i) {
    if (i == rank_) continue;
    PG_KIT_TRY(read_host(i));
    one_host_ = one_host_ && pids_[i] > 0;
  }
  return {};
}

Status UcxGroup::read_host(int peer) {
  std::string theirs;
  if (const Status st = kit::Store(store_).get(host_key(peer), timeout_.count(), &theirs);
      !st.ok()) {
    return store_failure(st.code, "reading rank " + std::to_string(peer) + "'s host identity",
                         "rank " + std::to_string(peer) + " never published its host identity");
  }
  host_known_.insert(peer);
  const size_t cut = theirs.rfind('\n');
  if (cut == identity_.size() && theirs.compare(0, cut, identity_) == 0) {
    pids_[peer] = std::atoi(theirs.c_str() + cut + 1);
  }
  return {};
}

void UcxGroup::watch_if_local(int peer) {
  if (peer == rank_ || processes_[peer].fd() >= 0) return;
  if (!host_known_.contains(peer) && !read_host(peer).ok()) return;
  if (pids_[peer] <= 0) return;
  bool gone = false;
  if (processes_[peer].open(pids_[peer], &gone) && waker_.watch(processes_[peer].fd(), peer)) {
    ++watched_peers_;
  } else if (gone) {
    exited_.push_back(peer);
  } else {
    processes_[peer].reset();
  }
}

void UcxGroup::watch_local_peers() {
  // A peer that died since it published is found gone here: the first poll breaks the group.
  // (watch_if_local adds nothing to host_known_ for a peer whose identity was read.)
  for (int peer : host_known_) watch_if_local(peer);
}

void UcxGroup::check_local_peers(int64_t timeout_us) {
  if (watched_peers_ > 0) waker_.wait(timeout_us, &exited_);
  if (!exited_.empty()) handle_exits();
}

std::string UcxGroup::exit_cause(int peer) const {
  const auto pid = pids_.find(peer);
  return "rank " + std::to_string(peer) + " (pid " +
         std::to_string(pid != pids_.end() ? pid->second : 0) + " on this host) exited";
}

void UcxGroup::handle_exits() {
  std::vector<int> exited;
  exited.swap(exited_);
  for (int peer : exited) {
    if (peer < 0 || peer >= size_) continue;
    if (processes_[peer].fd() >= 0) waker_.unwatch(processes_[peer].fd());
    processes_[peer].reset();
    // Anything it sent before exiting (its goodbye included) is already in our
    // shared-memory FIFO, maybe behind many other ranks' messages on a busy host: take it
    // in before judging, for a moment even when a poll finds nothing new.
    const auto until = Clock::now() + kGoodbyeGrace;
    while (!departed_[peer] && !broken_ && Clock::now() < until) {
      if (!poll_once()) std::this_thread::yield();
    }
    if (departed_[peer] || broken_) continue;
    if (ops_ == nullptr) {
      // Nothing here waits on it (this rank may be leaving too, its goodbye late on a busy
      // host): breaking now would tell the ranks still finishing their last operation to
      // fail. The next operation here fails instead (submit()).
      exited_idle_.push_back(peer);
      continue;
    }
    break_group(PG_ERR_PEER_LOST, exit_cause(peer), true);
  }
}

}  // namespace procgroup::ucx_backend
