// Full-mesh rendezvous with per-rank failures (see gloo_mesh.h).
#include "gloo_mesh.h"

#include <gloo/common/error.h>
#include <gloo/transport/context.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

namespace procgroup::gloo_backend {
namespace {

constexpr std::chrono::milliseconds kMinCheckTime{1000};

// Gloo's own wait in Pair::connect can run several times the timeout (and sleeps through
// a refused connection): past the deadline, close the pair, which ends that wait.
class ConnectWatchdog {
 public:
  ConnectWatchdog(gloo::transport::Pair* pair, Clock::time_point deadline)
      : thread_([this, pair, deadline](const std::stop_token& done) {
          std::mutex mu;
          std::unique_lock<std::mutex> lock(mu);
          std::condition_variable_any cv;
          cv.wait_until(lock, done, deadline, [] { return false; });  // a stop or the deadline
          if (done.stop_requested()) return;
          fired_ = true;
          pair->close();
        }) {}
  ConnectWatchdog(const ConnectWatchdog&) = delete;
  ConnectWatchdog& operator=(const ConnectWatchdog&) = delete;

  // Once connect() returned: whether the watchdog cut it short.
  bool fired() {
    thread_.request_stop();
    thread_.join();
    return fired_;
  }

 private:
  bool fired_ = false;   // written by the thread, read once it is joined
  std::jthread thread_;  // last: starts once fired_ exists; its destructor stops and joins it
};

// The join phase's keys (the store is the group's own): a counter, the flag its last rank
// sets, one key per rank; then each rank's pair addresses under "gloo/<rank>".
constexpr const char* kJoinedCount = "gloo/joined";
constexpr const char* kAllJoined = "gloo/all-joined";
std::string joined_key(int rank) { return "gloo/joined/" + std::to_string(rank); }
std::string address_key(int rank) { return "gloo/" + std::to_string(rank); }

// How long a failed join may spend finding out who is missing (one store read per rank).
constexpr std::chrono::milliseconds kMaxSearchTime{500};

// Ascending ranks kept as ranges: memory grows with the gaps, not the ranks.
class RankRanges {
 public:
  void add(int first, int last) {
    if (first > last) return;
    if (!ranges_.empty() && ranges_.back().second + 1 == first) {
      ranges_.back().second = last;
    } else {
      ranges_.emplace_back(first, last);
    }
  }
  std::string str() const {  // "1-3, 7"
    std::string text;
    for (const auto& [first, last] : ranges_) {
      text += (text.empty() ? "" : ", ") + std::to_string(first);
      if (last != first) text += "-" + std::to_string(last);
    }
    return text;
  }

 private:
  std::vector<std::pair<int, int>> ranges_;
};

}  // namespace

// Which ranks failed and how. For a timeout the first rank to time out is the one to
// blame: a timed-out wait in Gloo fails every connection of the context after it.
struct MeshContext::Failures {
  std::vector<std::pair<int, std::string>> lost;  // rank, what happened
  int silent = -1;

  bool has(int rank) const {
    return std::any_of(lost.begin(), lost.end(), [&](const auto& l) { return l.first == rank; });
  }
  void add(int rank, bool timed_out, const std::string& what) {
    if (has(rank)) return;
    lost.emplace_back(rank, what);
    if (timed_out && silent < 0) silent = rank;
  }
  Status status() const {
    if (lost.empty()) return {};
    const int blamed = silent >= 0 ? silent : lost.front().first;
    std::string text;
    std::string others;
    for (const auto& [r, what] : lost) {
      if (r == blamed) {
        text = what;
      } else {
        others += (others.empty() ? "" : ", ") + std::to_string(r);
      }
    }
    if (!others.empty()) text += " (also failed: rank " + others + ")";
    return Status::error(silent >= 0 ? PG_ERR_TIMEOUT : PG_ERR_PEER_LOST, text);
  }
};

// Who is here, before anything per peer exists: a rank costs O(1) memory and store calls
// here however large a size it was given, and pairs (one per peer) are made only once
// every rank has joined. The rank that completes the count sets a flag the others wait on.
Status MeshContext::await_ranks(const kit::Store& store, Clock::time_point deadline) {
  PG_KIT_TRY(store.set(joined_key(rank), "1"));
  int64_t joined = 0;
  PG_KIT_TRY(store.add(kJoinedCount, 1, &joined));
  if (joined >= size) return joined == size ? store.set(kAllJoined, "1") : Status{};
  std::string flag;
  Status waited = store.get(kAllJoined, left_until(deadline).count(), &flag);
  if (waited.code != PG_ERR_TIMEOUT) return waited;
  PG_KIT_TRY(store.add(kJoinedCount, 0, &joined));
  return missing_ranks(store, joined);
}

// The join timed out with `joined` ranks in: name the others, as far as a short search
// can (a rank that is missing has no key; the search stops once all are found).
Status MeshContext::missing_ranks(const kit::Store& store, int64_t joined) {
  const int64_t missing = size - joined;
  if (missing <= 0) return {};  // the last one came just now
  RankRanges ranges;
  int64_t found = 0;
  if (joined == 1) {  // only this rank: no need to look
    ranges.add(0, rank - 1);
    ranges.add(rank + 1, size - 1);
    found = missing;
  } else {
    const auto until =
        Clock::now() + std::min<std::chrono::milliseconds>(kMaxSearchTime, getTimeout() / 4);
    for (int r = 0; r < size && found < missing && Clock::now() < until; ++r) {
      bool there = r == rank;
      if (!there) PG_KIT_TRY(store.exists(joined_key(r), &there));
      if (there) continue;
      ranges.add(r, r);
      ++found;
    }
  }
  std::string who = std::to_string(missing) + " ranks";  // if the search found none in time
  if (found > 0) {
    who = (missing == 1 ? "rank " : "ranks ") + ranges.str();
    if (found < missing) who += " and " + std::to_string(missing - found) + " more";
  }
  std::string text = who + " did not join the rendezvous within " +
                     std::to_string(getTimeout().count()) + " ms (not started, stuck, or dead";
  if (missing > 1)
    text += "; " + std::to_string(joined) + " of " + std::to_string(size) + " joined";
  return Status::error(PG_ERR_TIMEOUT, text + ")");
}

Status MeshContext::connect_mesh(const kit::Store& store,
                                 std::shared_ptr<gloo::transport::Device>& device) {
  const auto timeout = getTimeout();
  const auto joined_by = Clock::now() + timeout;
  PG_KIT_TRY(await_ranks(store, joined_by));
  // Everyone is here: connecting gets the rest of the timeout, and a little more when the
  // last rank came late (at most 1.5 timeouts in all, with the check below).
  const auto deadline = std::max(joined_by, Clock::now() + timeout / 4);
  const std::string within = " within " + std::to_string(timeout.count()) + " ms";
  const std::string absent =
      " did not join the rendezvous" + within + " (not started, stuck, or dead)";
  const std::string cut_short =
      " did not complete" + within +
      " (it published its address, then died, stopped or became unreachable)";
  auto transport = device->createContext(rank, size);
  transport->setTimeout(timeout);
  std::string addresses;
  for (int i = 0; i < size; ++i) {
    if (i == rank) continue;
    const std::vector<char> bytes = transport->createPair(i)->address().bytes();
    addresses.append(bytes.begin(), bytes.end());
  }
  PG_KIT_TRY(store.set(address_key(rank), addresses));

  // A failure with one rank does not stop the others: the survivors finish their own
  // rendezvous and connection check, and each names the rank really at fault.
  Failures failures;
  for (int i = 0; i < size; ++i) {
    if (i == rank) continue;
    const std::string who = "rank " + std::to_string(i);
    std::string value;
    if (Status got = store.get(address_key(i), left_until(deadline).count(), &value); !got.ok()) {
      if (got.code != PG_ERR_TIMEOUT) return got;
      failures.add(i, true, who + absent);
      continue;
    }
    auto& pair = transport->getPair(i);
    bool cut = false;
    try {
      ConnectWatchdog watchdog(pair.get(), deadline);
      std::vector<char> theirs(value.begin(), value.end());
      pair->connect(extractAddress(theirs, i));
      cut = watchdog.fired();
    } catch (const std::exception& e) {
      failures.add(
          i, is_timeout(e.what()),
          "connecting to " + who +
              " failed (it published its address, then died or became unreachable): " + e.what());
    }
    if (cut) failures.add(i, true, ("connecting to " + who).append(cut_short));
  }
  device_ = device;
  transportContext_ = std::move(transport);
  // A rank that joined just before the deadline still gets a moment to answer.
  check_connections(failures, std::max(deadline, Clock::now() + std::min<std::chrono::milliseconds>(
                                                                    kMinCheckTime, timeout / 4)));
  return failures.status();
}

// One byte each way with every connected peer: a connection whose far end died or never
// answers fails here. Every exchange is waited for, even after a failure, so the survivors
// finish theirs with this rank before it gives up and closes its connections.
void MeshContext::check_connections(Failures& failures, Clock::time_point deadline) {
  const std::string within = " within " + std::to_string(getTimeout().count()) + " ms";
  std::vector<char> in(static_cast<size_t>(size), 0);
  std::vector<char> out(static_cast<size_t>(size), 1);
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> recvs(in.size());
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> sends(in.size());
  auto attempt = [&](int peer, auto&& fn) {
    if (failures.has(peer)) return;
    try {
      fn();
    } catch (const std::exception& e) {
      const bool timed_out = is_timeout(e.what());
      failures.add(
          peer, timed_out,
          "rank " + std::to_string(peer) +
              (timed_out ? " did not answer the connection check" + within + " (stuck or stopped): "
                         : " failed the connection check: ") +
              e.what());
    }
  };
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank || failures.has(peer)) continue;
    recvs[peer] = createUnboundBuffer(&in[peer], 1);
    sends[peer] = createUnboundBuffer(&out[peer], 1);
    attempt(peer, [&] { recvs[peer]->recv(peer, kMeshCheckSlot); });
    attempt(peer, [&] { sends[peer]->send(peer, kMeshCheckSlot); });
  }
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    attempt(peer, [&] { recvs[peer]->waitRecv(left_until(deadline)); });
    attempt(peer, [&] { sends[peer]->waitSend(left_until(deadline)); });
  }
}

}  // namespace procgroup::gloo_backend
