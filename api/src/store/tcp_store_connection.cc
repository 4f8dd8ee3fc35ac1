// The TCP store server's per-connection I/O: reading and framing input, queueing and
// flushing replies, failing and closing connections. Runs on the loop thread only.
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "common/log.h"
#include "store/tcp_store_loop.h"

namespace procgroup::detail {
namespace {

constexpr size_t kReadChunk = size_t{64} << 10;
constexpr size_t kReadBudgetPerEvent = size_t{1} << 20;  // fairness between clients

}  // namespace

void TcpStoreServer::Loop::on_event(uint64_t id, uint32_t events) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  Connection& c = it->second;
  if (events & EPOLLERR) {
    c.close_now = true;
  } else {
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)) read_input(c, events);
    if (!c.close_now && (events & EPOLLOUT)) flush(c);
    if (!c.close_now) process_input(c);  // a flush may have made room for more replies
  }
  settle(c);
}

size_t TcpStoreServer::Loop::input_limit(const Connection& c) const {
  return kFrameHeaderBytes + (c.authenticated ? kMaxFrameBytes : kMaxUnauthenticatedFrameBytes);
}

void TcpStoreServer::Loop::read_input(Connection& c, uint32_t events) {
  size_t budget = kReadBudgetPerEvent;
  uint8_t scratch[4096];
  while (budget > 0 && !c.eof) {
    uint8_t* dst = scratch;
    size_t want = sizeof scratch;
    size_t old = c.in.size();
    if (!c.lingering) {
      size_t room = input_limit(c) - std::min(input_limit(c), old);
      if (room == 0) {
        // Buffer full while a request waits: a hang-up can only be seen, not read.
        if (events & (EPOLLRDHUP | EPOLLHUP)) c.eof = true;
        break;
      }
      want = std::min({room, kReadChunk, budget});
      c.in.resize(old + want);
      dst = c.in.data() + old;
    }
    ssize_t n = ::recv(c.fd.get(), dst, want, 0);
    if (!c.lingering) c.in.resize(old + static_cast<size_t>(std::max<ssize_t>(n, 0)));
    if (n > 0) {
      budget -= std::min(budget, static_cast<size_t>(n));
      c.last_input = Clock::now();
      if (!c.lingering) process_input(c);
      continue;
    }
    if (n == 0) {
      c.eof = true;
      break;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      log(kLogDebug, "store", "receive from {} failed: {}", c.peer, errno_text(errno));
      c.close_now = true;
    }
    break;
  }
  if (!c.eof || c.close_now) return;
  if (c.lingering || c.waiter) {
    // Nobody left to answer (clients must not half-close while waiting).
    c.close_now = pending_out(c) == 0 || c.waiter.has_value();
  } else if (!c.in.empty()) {
    fail(c, PG_ERR_STORE,
         fmt::format("truncated frame: the connection closed after {} bytes of it", c.in.size()));
  } else if (pending_out(c) == 0) {
    c.close_now = true;
  }
}

void TcpStoreServer::Loop::process_input(Connection& c) {
  size_t off = 0;
  while (!c.close_now && !c.lingering && !c.waiter && pending_out(c) <= kMaxBufferedReplyBytes) {
    const size_t max = input_limit(c) - kFrameHeaderBytes;
    FrameSplit next = split_frame(std::span<const uint8_t>(c.in).subspan(off), max);
    if (next.kind == FrameSplit::kBadLength) {
      fail(c, PG_ERR_STORE,
           fmt::format("frame length {} is outside 1..{} bytes{}", next.length, max,
                       c.authenticated ? "" : " (not authenticated yet)"));
      break;
    }
    if (next.kind == FrameSplit::kIncomplete) {
      // Its length is known once the header is in: hold room for it, or refuse it now.
      if (next.length > 0 && !reserve(c, next.length)) {
        fail(c, PG_ERR_STORE,
             fmt::format("the store is full: a {}-byte frame would pass its limit of {} bytes "
                         "(PROCGROUP_STORE_MAX_BYTES; {} bytes stored)",
                         next.length, options_.max_bytes, stored_bytes_));
      }
      break;
    }
    release(c);
    off += kFrameHeaderBytes + next.body.size();
    handle_frame(c, next.body);  // copies what it keeps: c.in is compacted below
  }
  if (c.lingering) {
    c.in.clear();
  } else if (off > 0) {
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<ptrdiff_t>(off));
  }
  // A large frame's buffer is not kept for the connection's life: max_bytes counts it no more.
  if (c.in.empty() && c.in.capacity() > kReadChunk) Bytes().swap(c.in);
  // A partial frame that makes no progress is a stalled client.
  if (!c.in.empty() && !c.waiter && !c.lingering && !c.stall_at) {
    arm(c, TimerKind::kStall, c.last_input + options_.stalled_frame_timeout);
  }
}

void TcpStoreServer::Loop::queue(Connection& c, Bytes frame) {
  if (c.out.empty()) {
    c.out = std::move(frame);
    c.out_sent = 0;
  } else {
    c.out.insert(c.out.end(), frame.begin(), frame.end());
  }
}

void TcpStoreServer::Loop::queue_error(Connection& c, pg_status_t code, std::string_view message) {
  queue(c, FrameWriter(Op::kError).u32(static_cast<uint32_t>(code)).str(message).finish());
}

void TcpStoreServer::Loop::fail(Connection& c, pg_status_t code, std::string_view message) {
  if (c.lingering) return;
  log(code == PG_ERR_AUTH ? kLogWarn : kLogInfo, "store", "closing connection from {}: {}", c.peer,
      message);
  queue_error(c, code, message);
  drop_wait(c);
  c.lingering = true;
  c.in.clear();
  release(c);
  arm(c, TimerKind::kLinger, Clock::now() + kLingerTimeout);
}

void TcpStoreServer::Loop::flush(Connection& c) {
  while (pending_out(c) > 0) {
    ssize_t n =
        ::send(c.fd.get(), c.out.data() + c.out_sent, pending_out(c), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.out_sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    c.close_now = true;  // the peer is gone
    return;
  }
  c.out.clear();
  c.out_sent = 0;
  if (c.lingering && !c.write_shut) {
    ::shutdown(c.fd.get(), SHUT_WR);  // the client reads the ERROR, then EOF
    c.write_shut = true;
  }
  if (c.eof) c.close_now = true;
}

void TcpStoreServer::Loop::settle(Connection& c) {
  if (!c.close_now && pending_out(c) > 0) flush(c);
  if (c.close_now) {
    close_connection(c.id);
    return;
  }
  uint32_t want = 0;
  if (pending_out(c) > 0) want |= EPOLLOUT;
  if (!c.eof) {
    want |= EPOLLRDHUP;
    bool room = c.in.size() < input_limit(c) && pending_out(c) <= kMaxBufferedReplyBytes;
    if (c.lingering || room) want |= EPOLLIN;
  }
  if (want != c.interest) {
    epoll_event ev{};
    ev.events = want;
    ev.data.u64 = c.id;
    (void)epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c.fd.get(), &ev);
    c.interest = want;
  }
}

bool TcpStoreServer::Loop::reserve(Connection& c, uint64_t length) {
  if (length == c.reserved) return true;
  const size_t others = reserved_bytes_ - c.reserved;
  if (stored_bytes_ + others > options_.max_bytes ||
      length > options_.max_bytes - stored_bytes_ - others) {
    return false;
  }
  reserved_bytes_ = others + length;
  c.reserved = length;
  return true;
}

void TcpStoreServer::Loop::release(Connection& c) {
  reserved_bytes_ -= c.reserved;
  c.reserved = 0;
}

void TcpStoreServer::Loop::close_connection(uint64_t id) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  Connection& c = it->second;
  drop_wait(c);
  if (c.auth_at) timers_.erase({*c.auth_at, id, TimerKind::kAuth});
  if (c.stall_at) timers_.erase({*c.stall_at, id, TimerKind::kStall});
  if (c.linger_at) timers_.erase({*c.linger_at, id, TimerKind::kLinger});
  release(c);
  silent_.erase(id);
  log(kLogDebug, "store", "connection from {} closed", c.peer);
  connections_.erase(it);  // closing the fd also removes it from epoll
}

}  // namespace procgroup::detail
