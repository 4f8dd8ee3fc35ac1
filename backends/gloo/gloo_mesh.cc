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
#include <string>
#include <thread>
#include <vector>

namespace procgroup::gloo_backend {
namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds left_until(Clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
}

constexpr std::chrono::milliseconds kMinCheckTime{1000};

// Gloo's own wait in Pair::connect can run several times the timeout (and sleeps through
// a refused connection): past the deadline, close the pair, which ends that wait.
class ConnectWatchdog {
 public:
  ConnectWatchdog(gloo::transport::Pair* pair, Clock::time_point deadline)
      : thread_([this, pair, deadline] {
          std::unique_lock<std::mutex> lock(mu_);
          if (cv_.wait_until(lock, deadline, [&] { return done_; })) return;
          fired_ = true;
          pair->close();
        }) {}
  ~ConnectWatchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  ConnectWatchdog(const ConnectWatchdog&) = delete;
  ConnectWatchdog& operator=(const ConnectWatchdog&) = delete;

  // Once connect() returned: whether the watchdog cut it short.
  bool fired() {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    return fired_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  bool fired_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

bool is_timeout(const std::string& what) {
  return what.find("imeout") != std::string::npos || what.find("imed out") != std::string::npos;
}

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
    std::string text;
    if (silent >= 0) {
      for (const auto& [r, what] : lost)
        if (r == silent) text = what;
    } else {
      text = lost.front().second;
    }
    std::string others;
    for (const auto& [r, what] : lost) {
      if (r != (silent >= 0 ? silent : lost.front().first))
        others += (others.empty() ? "" : ", ") + std::to_string(r);
    }
    if (!others.empty()) text += " (also failed: rank " + others + ")";
    return Status::error(silent >= 0 ? PG_ERR_TIMEOUT : PG_ERR_PEER_LOST, text);
  }
};

Status MeshContext::connect_mesh(StoreAdapter& store,
                                 std::shared_ptr<gloo::transport::Device>& device) {
  const auto timeout = getTimeout();
  const auto deadline = Clock::now() + timeout;
  const std::string within = " within " + std::to_string(timeout.count()) + " ms";
  auto transport = device->createContext(rank, size);
  transport->setTimeout(timeout);
  std::vector<char> addresses;
  for (int i = 0; i < size; ++i) {
    if (i == rank) continue;
    const std::vector<char> bytes = transport->createPair(i)->address().bytes();
    addresses.insert(addresses.end(), bytes.begin(), bytes.end());
  }
  store.set(std::to_string(rank), addresses);  // StoreError: the caller names the store

  // A failure with one rank does not stop the others: the survivors finish their own
  // rendezvous and connection check, and each names the rank really at fault.
  Failures failures;
  for (int i = 0; i < size; ++i) {
    if (i == rank) continue;
    const std::string who = "rank " + std::to_string(i);
    std::vector<char> theirs;
    try {
      theirs = store.fetch(std::to_string(i), left_until(deadline));
    } catch (const StoreError& e) {
      if (e.status() != PG_ERR_TIMEOUT) throw;
      failures.add(
          i, true,
          who + " did not join the rendezvous" + within + " (not started, stuck, or dead)");
      continue;
    }
    auto& pair = transport->getPair(i);
    bool cut = false;
    try {
      ConnectWatchdog watchdog(pair.get(), deadline);
      pair->connect(extractAddress(theirs, i));
      cut = watchdog.fired();
    } catch (const std::exception& e) {
      failures.add(i, is_timeout(e.what()),
                   "connecting to " + who +
                       " failed (it published its address, then died or "
                       "became unreachable): " +
                       e.what());
    }
    if (cut) {
      failures.add(i, true,
                   "connecting to " + who + " did not complete" + within +
                       " (it published its address, then died, stopped or became "
                       "unreachable)");
    }
  }
  device_ = device;
  transportContext_ = std::move(transport);
  // A rank that joined just before the deadline still gets a moment to answer.
  check_connections(failures, std::max(deadline, Clock::now() + kMinCheckTime));
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
