// send/recv: matched by (src, dst, tag) in issue order, outside the collective queue.
//
// A send copies its payload when it is issued: straight into the matching recv if one is
// posted, else into a message queued for the receiver. Either way the send completes before
// its entry returns, so no pattern of blocking or non-blocking sends can deadlock (the core's
// emulated collectives rely on that). A recv completes when it finds or receives a message;
// its deadline is enforced by its rank's worker (sweep_recvs_locked).
#include <cstring>
#include <limits>

#include "loopback_group.h"

namespace procgroup::loopback {
namespace {

// send reads op.input and recv writes op.output; a caller that put its one buffer in the
// other field is accepted too.
const pg_buffer_t& p2p_buffer(const pg_backend_op_t& op, bool is_send) {
  const pg_buffer_t& first = is_send ? op.input : op.output;
  const pg_buffer_t& second = is_send ? op.output : op.input;
  bool first_used = first.data != nullptr || first.count != 0;
  bool second_used = second.data != nullptr || second.count != 0;
  return first_used || !second_used ? first : second;
}

Status check_p2p(const pg_backend_op_t& op, const pg_buffer_t& b, int size, uint64_t* bytes) {
  const char* name = op_name(op.op);
  auto invalid = [&](const std::string& what) {
    return Status{PG_ERR_INVALID_ARGUMENT, std::string(name) + ": " + what};
  };
  if (op.peer < 0 || op.peer >= size) {
    return invalid("peer " + std::to_string(op.peer) + " is not a rank of a group of size " +
                   std::to_string(size));
  }
  *bytes = 0;
  if (b.data == nullptr && b.count == 0) return {};
  if (b.struct_size < sizeof(pg_buffer_t)) return invalid("buffer.struct_size is too small");
  if (b.data == nullptr) {
    return invalid("buffer has " + std::to_string(b.count) + " elements but a NULL data pointer");
  }
  uint64_t esize = dtype_size(b.dtype);
  if (esize == 0) return invalid("buffer has invalid dtype " + std::to_string(b.dtype));
  if (b.device_type != PG_DEVICE_CPU) {
    return {PG_ERR_UNSUPPORTED, std::string(name) + ": buffer is on device type " +
                                    std::to_string(b.device_type) +
                                    "; loopback handles CPU buffers only"};
  }
  if (b.count > std::numeric_limits<uint64_t>::max() / esize) return invalid("count overflows");
  *bytes = b.count * esize;
  return {};
}

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

Status RankGroup::submit_send(const pg_backend_op_t& op, WorkRef* out) {
  const pg_buffer_t& buffer = p2p_buffer(op, /*is_send=*/true);
  uint64_t bytes = 0;
  if (Status o = check_p2p(op, buffer, shared_->size, &bytes); !o.ok()) return o;
  const P2pKey key{op.peer, rank_, op.tag};
  SharedGroup& g = *shared_;
  WorkRef work(new Work());
  *out = work;
  std::vector<uint8_t> payload;
  for (int attempt = 0;; ++attempt) {
    std::unique_lock lock(g.mu);
    if (g.failed) {
      work->complete(g.failure_for(0));
      return {};
    }
    auto it = g.recvs.find(key);
    if (it != g.recvs.end()) {
      PendingRecv recv = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) g.recvs.erase(it);
      ++g.slots[key.dst].deliveries;
      lock.unlock();
      deliver(recv, attempt == 0 ? buffer.data : payload.data(), bytes, work.get(), key);
      lock.lock();
      --g.slots[key.dst].deliveries;
      g.cv.notify_all();
      return {};
    }
    if (attempt == 1) {
      g.messages[key].push_back(std::move(payload));
      work->complete(PG_OK);
      return {};
    }
    // No recv yet: copy without holding the group lock, then look again (a recv may have
    // been posted meanwhile).
    lock.unlock();
    const auto* data = static_cast<const uint8_t*>(buffer.data);
    payload.assign(data, data + bytes);
  }
}

Status RankGroup::submit_recv(const pg_backend_op_t& op, WorkRef* out) {
  const pg_buffer_t& buffer = p2p_buffer(op, /*is_send=*/false);
  uint64_t bytes = 0;
  if (Status o = check_p2p(op, buffer, shared_->size, &bytes); !o.ok()) return o;
  const P2pKey key{rank_, op.peer, op.tag};
  SharedGroup& g = *shared_;
  WorkRef work(new Work());
  *out = work;
  PendingRecv recv{work,   buffer.data,      bytes,
                   op.seq, deadline_for(op), op.timeout_ms > 0 ? op.timeout_ms : timeout_ms_};
  std::unique_lock lock(g.mu);
  if (g.failed) {
    work->complete(g.failure_for(0));
    return {};
  }
  auto it = g.messages.find(key);
  if (it == g.messages.end()) {
    g.recvs[key].push_back(std::move(recv));
    g.cv.notify_all();  // our worker must learn the new deadline
    return {};
  }
  std::vector<uint8_t> payload = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) g.messages.erase(it);
  lock.unlock();
  deliver(recv, payload.data(), payload.size(), nullptr, key);
  return {};
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
