// An in-memory Transport where the ranks of a group are threads of one process, for the
// fallback collectives' unit tests; and a wrapper that injects a failure at a chosen call.
//
//   ThreadWorld world(4, std::chrono::milliseconds(10000));
//   std::vector<Status> results = world.run([](Transport& t) {
//     return fallback_barrier(t, CollectiveArgs{});
//   });
//
// Semantics: mailboxes keyed by (src, dst, tag), FIFO per key; isend copies the payload
// at once and never blocks; an irecv is matched, in posting order, to the sends of its key
// and completes when its message is there; a size mismatch between a send and its receive
// is PG_ERR_MISMATCH; wait() gives up with PG_ERR_TIMEOUT after the world's timeout.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "collectives/transport.h"
#include "common/status.h"

namespace procgroup::detail::testing {

class ThreadWorld {
 public:
  ThreadWorld(int size, std::chrono::milliseconds timeout);
  ThreadWorld(const ThreadWorld&) = delete;
  ThreadWorld& operator=(const ThreadWorld&) = delete;

  int size() const { return size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Runs fn(transport) on one thread per rank and returns each rank's status.
  std::vector<Status> run(const std::function<Status(Transport&)>& fn);
  // Like run(), but fn gets wrap(rank, transport) instead of the rank's transport.
  std::vector<Status> run_wrapped(
      const std::function<std::unique_ptr<Transport>(int rank, Transport& inner)>& wrap,
      const std::function<Status(Transport&)>& fn);

  // Sends posted by `rank` so far (tests use it to tell algorithms apart).
  uint64_t sends_posted(int rank);
  // Messages sent but never received, over all mailboxes.
  uint64_t unreceived_messages();

 private:
  friend class ThreadTransport;
  friend class ThreadRecv;
  struct Mailbox {
    uint64_t sends = 0;                                // tickets handed to sends so far
    uint64_t recvs = 0;                                // tickets handed to receives so far
    std::map<uint64_t, std::vector<uint8_t>> arrived;  // by ticket, until received
  };
  using Key = std::tuple<int, int, uint64_t>;  // src, dst, tag

  const int size_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, Mailbox> boxes_;
  std::vector<uint64_t> sends_posted_;
};

class ThreadTransport : public Transport {
 public:
  ThreadTransport(ThreadWorld& world, int rank) : world_(world), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return world_.size(); }
  Result<Request> isend(int peer, const void* data, size_t bytes, uint64_t tag) override;
  Result<Request> irecv(int peer, void* data, size_t bytes, uint64_t tag) override;

 private:
  Status check_peer(int peer, const void* data, size_t bytes, const char* what) const;
  ThreadWorld& world_;
  const int rank_;
};

// Forwards to `inner` until its call number `fail_at` (isend and irecv calls counted
// together, from 0). That call fails with `code`: when it is posted (fail_in_wait false)
// or, posted fine from the caller's view, when it is waited for (the message is then never
// sent or received). Later calls are forwarded again.
class FaultyTransport : public Transport {
 public:
  FaultyTransport(Transport& inner, int fail_at, bool fail_in_wait, pg_status_t code)
      : inner_(inner), fail_at_(fail_at), fail_in_wait_(fail_in_wait), code_(code) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  Result<Request> isend(int peer, const void* data, size_t bytes, uint64_t tag) override;
  Result<Request> irecv(int peer, void* data, size_t bytes, uint64_t tag) override;
  int calls() const { return calls_; }

 private:
  Result<Request> maybe_fail(const char* what, int peer);
  Transport& inner_;
  const int fail_at_;
  const bool fail_in_wait_;
  const pg_status_t code_;
  int calls_ = 0;
};

}  // namespace procgroup::detail::testing
