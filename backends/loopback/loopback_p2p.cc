// send/recv: matched by (src, dst, tag) in issue order, outside the collective queue.
//
// A send copies its payload when it is issued: straight into the matching recv if one is
// posted, else into a message queued for the receiver. Either way the send completes before
// its entry returns, so no pattern of blocking or non-blocking sends can deadlock (the core's
// emulated collectives rely on that). A recv completes when it finds or receives a message;
// its deadline is enforced by its rank's worker (sweep_recvs_locked).
#include <cstring>

#include "loopback_group.h"

namespace procgroup::loopback {
namespace {

std::string route(const P2pKey& key) {
  return "rank " + std::to_string(key.src) + " to rank " + std::to_string(key.dst) + " (tag " +
         std::to_string(key.tag) + ")";
}

}  // namespace

void RankGroup::deliver(PendingRecv& recv, const void* data, uint64_t bytes, Work* send_work,
                        const P2pKey& key) {
  if (recv.bytes != bytes) {
    std::string message = "send of " + std::to_string(bytes) + " bytes from " + route(key) +
                          " matched a recv of " + std::to_string(recv.bytes) + " bytes";
    recv.work->complete(PG_ERR_INVALID_ARGUMENT, message);
    if (send_work != nullptr) send_work->complete(PG_ERR_INVALID_ARGUMENT, message);
    return;
  }
  if (bytes != 0) std::memcpy(recv.data, data, bytes);
  recv.work->complete(PG_OK);
  if (send_work != nullptr) send_work->complete(PG_OK);
}

void RankGroup::submit_send(const pg_backend_op_t& op, const kit::Plan& plan, const WorkRef& work) {
  const uint64_t bytes = plan.bytes();  // at plan.in
  const P2pKey key{op.peer, rank_, op.tag};
  SharedGroup& g = *shared_;
  std::vector<uint8_t> payload;
  for (int attempt = 0;; ++attempt) {
    std::unique_lock lock(g.mu);
    if (g.failed) {
      work->complete(g.failure_for(0));
      return;
    }
    auto it = g.recvs.find(key);
    if (it != g.recvs.end()) {
      PendingRecv recv = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) g.recvs.erase(it);
      ++g.slots[key.dst].deliveries;
      lock.unlock();
      const void* data = attempt == 0 ? static_cast<const void*>(plan.in) : payload.data();
      deliver(recv, data, bytes, work.get(), key);
      lock.lock();
      --g.slots[key.dst].deliveries;
      g.cv.notify_all();
      return;
    }
    if (attempt == 1) {
      g.messages[key].push_back(std::move(payload));
      work->complete(PG_OK);
      return;
    }
    // No recv yet: copy without holding the group lock, then look again (a recv may have
    // been posted meanwhile).
    lock.unlock();
    const auto* data = reinterpret_cast<const uint8_t*>(plan.in);
    payload.assign(data, data + bytes);
  }
}

void RankGroup::submit_recv(const pg_backend_op_t& op, const kit::Plan& plan, const WorkRef& work) {
  const P2pKey key{rank_, op.peer, op.tag};
  SharedGroup& g = *shared_;
  const int64_t timeout_ms = timeout_of(op);
  PendingRecv recv{work, plan.out, plan.bytes(), op.seq, deadline_after(timeout_ms), timeout_ms};
  std::unique_lock lock(g.mu);
  if (g.failed) {
    work->complete(g.failure_for(0));
    return;
  }
  auto it = g.messages.find(key);
  if (it == g.messages.end()) {
    g.recvs[key].push_back(std::move(recv));
    g.cv.notify_all();  // our worker must learn the new deadline
    return;
  }
  std::vector<uint8_t> payload = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) g.messages.erase(it);
  lock.unlock();
  deliver(recv, payload.data(), payload.size(), nullptr, key);
}

Clock::time_point RankGroup::sweep_recvs_locked() {
  SharedGroup& g = *shared_;
  Clock::time_point next = kNever;
  const Clock::time_point now = Clock::now();
  auto it = g.recvs.lower_bound(P2pKey{rank_, std::numeric_limits<int>::min(), 0});
  for (; it != g.recvs.end() && it->first.dst == rank_; ++it) {
    for (PendingRecv& recv : it->second) {
      if (recv.deadline > now) {
        next = std::min(next, recv.deadline);
        continue;
      }
      std::string message = "recv from " + route(it->first) + " as op #" +
                            std::to_string(recv.seq) + " timed out after " +
                            std::to_string(recv.timeout_ms) + " ms in loopback group '" +
                            g.group_id + "'; not heard from rank " + std::to_string(it->first.src);
      recv.work->complete(PG_ERR_TIMEOUT, message);
      // Like a collective's timeout, this fails the whole group (and clears g.recvs).
      g.fail_locked(PG_ERR_TIMEOUT, std::move(message), 0);
      return kNever;
    }
  }
  return next;
}

}  // namespace procgroup::loopback
