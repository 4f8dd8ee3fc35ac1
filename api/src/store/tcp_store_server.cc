#include "store/tcp_store_server.h"

#include <netinet/in.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "store/tcp_store_loop.h"

namespace procgroup::detail {
namespace {

constexpr int kAcceptsPerEvent = 64;
constexpr Millis kAcceptPause{100};  // after EMFILE: let connections close, then retry

void set_port(sockaddr_storage& addr, int port) {
  if (addr.ss_family == AF_INET) {
    reinterpret_cast<sockaddr_in&>(addr).sin_port = htons(static_cast<uint16_t>(port));
  } else if (addr.ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6&>(addr).sin6_port = htons(static_cast<uint16_t>(port));
  }
}

bool on_loopback(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return false;
  if (addr.ss_family == AF_INET) {
    return (ntohl(reinterpret_cast<sockaddr_in&>(addr).sin_addr.s_addr) >> 24) == 127;
  }
  const in6_addr& a6 = reinterpret_cast<sockaddr_in6&>(addr).sin6_addr;
  return addr.ss_family == AF_INET6 &&
         (IN6_IS_ADDR_LOOPBACK(&a6) || (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127));
}

int bound_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in&>(addr).sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6&>(addr).sin6_port);
}

// Binds and listens on every address host resolves to, all on one port.
Result<std::vector<UniqueFd>> listen_on(const std::string& host, int port, int* chosen) {
  if (host.empty()) return make_error(PG_ERR_CONFIG, "the store needs a host to listen on");
  PG_ASSIGN_OR_RETURN(AddrInfoList addrs, resolve_tcp(host, port, false));
  std::vector<UniqueFd> out;
  std::string first_failure;
  *chosen = port;
  for (const addrinfo* ai = addrs.head(); ai != nullptr; ai = ai->ai_next) {
    sockaddr_storage addr{};
    std::memcpy(&addr, ai->ai_addr, ai->ai_addrlen);
    set_port(addr, *chosen);
    auto* sa = reinterpret_cast<sockaddr*>(&addr);
    std::string where = host_port(host, *chosen);
    std::string numeric = sockaddr_text(sa, ai->ai_addrlen);
    if (numeric != where) where += fmt::format(" ({})", numeric);

    UniqueFd fd(::socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) {
      if (first_failure.empty()) first_failure = fmt::format("{}: {}", where, errno_text(errno));
      continue;
    }
    int one = 1;
    // SO_REUSEADDR skips TIME_WAIT; on Linux it never lets two listeners share a port.
    (void)setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ai->ai_family == AF_INET6) {
      (void)setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    }
    if (::bind(fd.get(), sa, ai->ai_addrlen) != 0 || ::listen(fd.get(), SOMAXCONN) != 0) {
      int err = errno;
      if (err == EADDRINUSE) {
        return make_error(PG_ERR_STORE,
                          "cannot listen on {}: {} (is another job using MASTER_PORT?)", where,
                          errno_text(err));
      }
      if (first_failure.empty()) first_failure = fmt::format("{}: {}", where, errno_text(err));
      continue;
    }
    if (*chosen == 0) *chosen = bound_port(fd.get());
    out.push_back(std::move(fd));
  }
  if (out.empty()) {
    if (first_failure.empty()) first_failure = fmt::format("'{}' has no address", host);
    return make_error(PG_ERR_STORE, "cannot listen on {}", first_failure);
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<TcpStoreServer>> TcpStoreServer::start(TcpStoreServerOptions options) {
  if (options.port < 0 || options.port > 65535) {
    return make_error(PG_ERR_CONFIG, "store port {} is out of range 0..65535", options.port);
  }
  int port = 0;
  PG_ASSIGN_OR_RETURN(auto listeners, listen_on(options.host, options.port, &port));
  const bool open_to_all = options.token.empty() &&
                           std::any_of(listeners.begin(), listeners.end(),
                                       [](const UniqueFd& fd) { return !on_loopback(fd.get()); });
  UniqueFd epoll(epoll_create1(EPOLL_CLOEXEC));
  UniqueFd wake(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll.valid() || !wake.valid()) {
    return make_error(PG_ERR_STORE, "cannot create the store's event loop: {}", errno_text(errno));
  }
  std::unique_ptr<TcpStoreServer> server(new TcpStoreServer());
  server->host_ = options.host;
  server->port_ = port;
  server->loop_ = std::make_unique<Loop>(std::move(options), std::move(listeners), std::move(epoll),
                                         std::move(wake));
  Loop* loop = server->loop_.get();
  server->thread_ = std::thread([loop] { loop->run(); });
  log(kLogInfo, "store", "serving on {}", host_port(server->host_, port));
  if (open_to_all) {
    log(kLogWarn, "store",
        "the store on {} accepts any client that reaches it (no PROCGROUP_STORE_TOKEN): set "
        "the same PROCGROUP_STORE_TOKEN on every rank to require it",
        host_port(server->host_, port));
  }
  return server;
}

TcpStoreServer::~TcpStoreServer() {
  if (loop_) loop_->stop();
  if (thread_.joinable()) thread_.join();
}

TcpStoreServer::Loop::Loop(TcpStoreServerOptions options, std::vector<UniqueFd> listeners,
                           UniqueFd epoll, UniqueFd wake)
    : options_(std::move(options)),
      listeners_(std::move(listeners)),
      epoll_(std::move(epoll)),
      wake_(std::move(wake)) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeId;
  (void)epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev);
  for (size_t i = 0; i < listeners_.size(); ++i) {
    ev.data.u64 = kListenerIdBase + i;
    (void)epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listeners_[i].get(), &ev);
  }
}

void TcpStoreServer::Loop::stop() {
  stop_.store(true);
  uint64_t one = 1;
  ssize_t ignored = ::write(wake_.get(), &one, sizeof one);
  (void)ignored;
}

void TcpStoreServer::Loop::run() {
  epoll_event events[64];
  while (!stop_.load()) {
    int n = epoll_wait(epoll_.get(), events, 64, next_timeout_ms());
    if (n < 0 && errno != EINTR) {
      log(kLogError, "store", "epoll_wait failed: {}; the store stops", errno_text(errno));
      return;
    }
    for (int i = 0; i < n; ++i) {
      uint64_t id = events[i].data.u64;
      if (id == kWakeId) continue;  // stop_ is checked by the loop condition
      try {
        if (id < kFirstConnectionId) {
          accept_all(id - kListenerIdBase);
        } else {
          on_event(id, events[i].events);
        }
        run_ready();
      } catch (const std::exception& e) {
        // Out of memory for one client's frame: drop that client, keep serving the rest.
        log(kLogError, "store", "dropping a connection after an error: {}", e.what());
        close_connection(id);
      }
    }
    try {
      fire_timers();
      run_ready();
    } catch (const std::exception& e) {
      log(kLogError, "store", "error while handling timers: {}", e.what());
    }
  }
}

int TcpStoreServer::Loop::next_timeout_ms() const {
  if (timers_.empty()) return -1;
  auto left = std::get<0>(*timers_.begin()) - Clock::now();
  auto ms = std::chrono::ceil<Millis>(left).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, INT32_MAX));
}

void TcpStoreServer::Loop::set_accepting(bool on) {
  accepting_ = on;
  for (size_t i = 0; i < listeners_.size(); ++i) {
    epoll_event ev{};
    ev.events = on ? uint32_t{EPOLLIN} : 0u;
    ev.data.u64 = kListenerIdBase + i;
    (void)epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, listeners_[i].get(), &ev);
  }
}

void TcpStoreServer::Loop::accept_all(size_t listener) {
  for (int i = 0; i < kAcceptsPerEvent && accepting_; ++i) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    int raw = accept4(listeners_[listener].get(), reinterpret_cast<sockaddr*>(&addr), &len,
                      SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (raw < 0) {
      int err = errno;
      if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      // Out of descriptors: a connection that never spoke gives its own up.
      if ((err == EMFILE || err == ENFILE) && evict_silent("the store is out of descriptors")) {
        continue;
      }
      // Out of descriptors or memory: the listener would stay readable and spin the loop.
      log(kLogWarn, "store", "accept failed: {}; pausing new connections", errno_text(err));
      set_accepting(false);
      timers_.emplace(Clock::now() + kAcceptPause, 0, TimerKind::kResumeAccept);
      return;
    }
    UniqueFd fd(raw);
    std::string peer = sockaddr_text(reinterpret_cast<sockaddr*>(&addr), len);
    // At the limit, a connection that only sits there gives its slot to this one, so real
    // ranks still get in.
    if (connections_.size() >= options_.max_connections) {
      (void)evict_silent(
          fmt::format("the store is at its limit of {} connections", options_.max_connections));
    }
    if (connections_.size() >= options_.max_connections) {
      log(kLogWarn, "store", "refusing {}: already {} connections (the limit)", peer,
          connections_.size());
      Bytes frame =
          FrameWriter(Op::kError)
              .u32(static_cast<uint32_t>(PG_ERR_STORE))
              .str(fmt::format("too many connections (limit {})", options_.max_connections))
              .finish();
      (void)::send(fd.get(), frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      continue;
    }
    set_no_delay(fd.get());
    uint64_t id = next_id_++;
    Connection& c = connections_[id];
    c.id = id;
    c.fd = std::move(fd);
    c.peer = std::move(peer);
    c.last_input = Clock::now();
    c.interest = EPOLLIN | EPOLLRDHUP;
    epoll_event ev{};
    ev.events = c.interest;
    ev.data.u64 = id;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, c.fd.get(), &ev) != 0) {
      log(kLogWarn, "store", "cannot watch {}: {}", c.peer, errno_text(errno));
      connections_.erase(id);
      continue;
    }
    log(kLogDebug, "store", "connection from {}", c.peer);
    silent_.insert(id);
    send_hello(c);
    settle(c);
  }
}

bool TcpStoreServer::Loop::evict_silent(std::string_view why) {
  if (silent_.empty()) return false;
  auto it = connections_.find(*silent_.begin());
  if (it == connections_.end()) {
    silent_.erase(silent_.begin());
    return true;
  }
  Connection& c = it->second;
  const int level = warned_evicting_ ? kLogDebug : kLogWarn;
  warned_evicting_ = true;
  log(level, "store", "{}: closing {}, which has sent nothing{}", why, c.peer,
      level == kLogWarn ? " (further such closes are logged at debug level)" : "");
  Bytes frame = FrameWriter(Op::kError)
                    .u32(static_cast<uint32_t>(PG_ERR_STORE))
                    .str(fmt::format("closed: {} and this connection sent nothing", why))
                    .finish();
  (void)::send(c.fd.get(), frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  close_connection(c.id);
  return true;
}

void TcpStoreServer::Loop::arm(Connection& c, TimerKind kind, Clock::time_point at) {
  auto& slot = kind == TimerKind::kAuth    ? c.auth_at
               : kind == TimerKind::kStall ? c.stall_at
                                           : c.linger_at;
  if (slot) timers_.erase({*slot, c.id, kind});
  slot = at;
  timers_.emplace(at, c.id, kind);
}

void TcpStoreServer::Loop::fire_timers() {
  auto now = Clock::now();
  while (!timers_.empty() && std::get<0>(*timers_.begin()) <= now) {
    auto [at, id, kind] = *timers_.begin();
    timers_.erase(timers_.begin());
    if (kind == TimerKind::kResumeAccept) {
      set_accepting(true);
      continue;
    }
    auto it = connections_.find(id);
    if (it == connections_.end()) continue;
    Connection& c = it->second;
    switch (kind) {
      case TimerKind::kAuth:
        c.auth_at.reset();
        if (c.spoke) break;
        if (!options_.token.empty()) {
          fail(c, PG_ERR_AUTH, "no authentication answer in time");
        } else {
          fail(c, PG_ERR_TIMEOUT,
               fmt::format("no request within {} ms of connecting", options_.auth_timeout.count()));
        }
        break;
      case TimerKind::kWaiter:
        if (c.waiter && c.waiter->deadline == at) expire_wait(c);
        break;
      case TimerKind::kStall:
        c.stall_at.reset();
        if (c.in.empty() || c.waiter || c.lingering) break;
        if (c.last_input + options_.stalled_frame_timeout <= now) {
          fail(c, PG_ERR_TIMEOUT,
               fmt::format("incomplete frame ({} bytes) stalled for {} ms", c.in.size(),
                           options_.stalled_frame_timeout.count()));
        } else {
          arm(c, TimerKind::kStall, c.last_input + options_.stalled_frame_timeout);
        }
        break;
      case TimerKind::kLinger:
        c.linger_at.reset();
        c.close_now = true;
        break;
      case TimerKind::kResumeAccept: break;
    }
    settle(c);
  }
}

void TcpStoreServer::Loop::run_ready() {
  while (!ready_.empty()) {
    std::vector<uint64_t> ids;
    ids.swap(ready_);
    for (uint64_t id : ids) {
      auto it = connections_.find(id);
      if (it == connections_.end()) continue;
      process_input(it->second);
      settle(it->second);
    }
  }
}

}  // namespace procgroup::detail
