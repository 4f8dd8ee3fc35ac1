#include "thread_transport.h"

#include <fmt/format.h>

#include <cstring>
#include <thread>
#include <utility>

#include "common/deadline.h"

namespace procgroup::detail::testing {
namespace {

class DoneRequest : public PendingIo {
 public:
  explicit DoneRequest(Status status) : status_(std::move(status)) {}
  Status wait() override { return status_; }

 private:
  Status status_;
};

}  // namespace

// A receive holds its ticket, so it matches the ticket-th send of its key whatever the
// order in which the caller waits.
class ThreadRecv : public PendingIo {
 public:
  ThreadRecv(ThreadWorld& world, ThreadWorld::Key key, uint64_t ticket, void* data, size_t bytes)
      : world_(world), key_(key), ticket_(ticket), data_(data), bytes_(bytes) {}

  Status wait() override {
    if (done_) return status_;
    done_ = true;
    const Deadline deadline = Deadline::after(world_.timeout());
    std::unique_lock lock(world_.mu_);
    ThreadWorld::Mailbox& box = world_.boxes_[key_];
    const bool arrived =
        world_.cv_.wait_until(lock, deadline.at(), [&] { return box.arrived.count(ticket_) != 0; });
    const auto [src, dst, tag] = key_;
    if (!arrived) {
      status_ = make_error(PG_ERR_TIMEOUT, "rank {}: nothing from rank {} (tag {}) within {} ms",
                           dst, src, tag, world_.timeout().count());
      return status_;
    }
    auto node = box.arrived.extract(ticket_);
    lock.unlock();
    const std::vector<uint8_t>& payload = node.mapped();
    if (payload.size() != bytes_) {
      status_ = make_error(PG_ERR_MISMATCH,
                           "rank {}: receive of {} bytes from rank {} (tag {}) matched a send "
                           "of {} bytes",
                           dst, bytes_, src, tag, payload.size());
      return status_;
    }
    if (bytes_ != 0) std::memcpy(data_, payload.data(), bytes_);
    return status_;
  }

 private:
  ThreadWorld& world_;
  const ThreadWorld::Key key_;
  const uint64_t ticket_;
  void* const data_;
  const size_t bytes_;
  bool done_ = false;
  Status status_;
};

ThreadWorld::ThreadWorld(int size, std::chrono::milliseconds timeout)
    : size_(size), timeout_(timeout), sends_posted_(static_cast<size_t>(size), 0) {}

std::vector<Status> ThreadWorld::run(const std::function<Status(Transport&)>& fn) {
  return run_wrapped(nullptr, fn);
}

std::vector<Status> ThreadWorld::run_wrapped(
    const std::function<std::unique_ptr<Transport>(int, Transport&)>& wrap,
    const std::function<Status(Transport&)>& fn) {
  std::vector<Status> results(static_cast<size_t>(size_));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(size_));
  for (int rank = 0; rank < size_; ++rank) {
    threads.emplace_back([&, rank] {
      ThreadTransport base(*this, rank);
      std::unique_ptr<Transport> wrapped = wrap ? wrap(rank, base) : nullptr;
      results[static_cast<size_t>(rank)] = fn(wrapped ? *wrapped : base);
    });
  }
  for (std::thread& thread : threads) thread.join();
  return results;
}

uint64_t ThreadWorld::sends_posted(int rank) {
  std::lock_guard lock(mu_);
  return sends_posted_.at(static_cast<size_t>(rank));
}

uint64_t ThreadWorld::unreceived_messages() {
  std::lock_guard lock(mu_);
  uint64_t n = 0;
  for (const auto& [key, box] : boxes_) n += box.arrived.size();
  return n;
}

Status ThreadTransport::check_peer(int peer, const void* data, size_t bytes,
                                   const char* what) const {
  if (peer < 0 || peer >= world_.size() || peer == rank_) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "rank {}: {} with bad peer {}", rank_, what, peer);
  }
  if (data == nullptr && bytes != 0) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "rank {}: {} of {} bytes from null", rank_, what,
                      bytes);
  }
  return ok_status();
}

Result<Request> ThreadTransport::isend(int peer, const void* data, size_t bytes, uint64_t tag) {
  PG_RETURN_IF_ERROR(check_peer(peer, data, bytes, "isend"));
  std::vector<uint8_t> payload(static_cast<const uint8_t*>(data),
                               static_cast<const uint8_t*>(data) + bytes);
  {
    std::lock_guard lock(world_.mu_);
    ThreadWorld::Mailbox& box = world_.boxes_[{rank_, peer, tag}];
    box.arrived.emplace(box.sends++, std::move(payload));
    ++world_.sends_posted_[static_cast<size_t>(rank_)];
  }
  world_.cv_.notify_all();
  return Request(std::make_unique<DoneRequest>(ok_status()));
}

Result<Request> ThreadTransport::irecv(int peer, void* data, size_t bytes, uint64_t tag) {
  PG_RETURN_IF_ERROR(check_peer(peer, data, bytes, "irecv"));
  const ThreadWorld::Key key{peer, rank_, tag};
  uint64_t ticket = 0;
  {
    std::lock_guard lock(world_.mu_);
    ticket = world_.boxes_[key].recvs++;
  }
  return Request(std::make_unique<ThreadRecv>(world_, key, ticket, data, bytes));
}

Result<Request> FaultyTransport::maybe_fail(const char* what, int peer) {
  const Status injected =
      make_error(code_, "injected failure of call {} ({} with rank {}) on rank {}", fail_at_, what,
                 peer, inner_.rank());
  if (!fail_in_wait_) return injected;
  return Request(std::make_unique<DoneRequest>(injected));
}

Result<Request> FaultyTransport::isend(int peer, const void* data, size_t bytes, uint64_t tag) {
  if (calls_++ == fail_at_) return maybe_fail("isend", peer);
  return inner_.isend(peer, data, bytes, tag);
}

Result<Request> FaultyTransport::irecv(int peer, void* data, size_t bytes, uint64_t tag) {
  if (calls_++ == fail_at_) return maybe_fail("irecv", peer);
  return inner_.irecv(peer, data, bytes, tag);
}

}  // namespace procgroup::detail::testing
