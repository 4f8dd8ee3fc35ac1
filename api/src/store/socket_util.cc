#include "store/socket_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include <cerrno>

namespace procgroup::detail {

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::string errno_text(int err) {
  char buf[256];
  // GNU strerror_r returns the message pointer (maybe not buf).
  return strerror_r(err, buf, sizeof buf);
}

std::string host_port(std::string_view host, int port) {
  if (host.find(':') != std::string_view::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

std::string sockaddr_text(const sockaddr* addr, socklen_t len) {
  char host[NI_MAXHOST];
  char serv[NI_MAXSERV];
  if (getnameinfo(addr, len, host, sizeof host, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "?";
  }
  return host_port(host, std::atoi(serv));
}

AddrInfoList::~AddrInfoList() {
  if (head_ != nullptr) freeaddrinfo(head_);
}

Result<AddrInfoList> resolve_tcp(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* head = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &head);
  if (rc != 0) {
    std::string reason = rc == EAI_SYSTEM ? errno_text(errno) : gai_strerror(rc);
    return make_error(PG_ERR_STORE, "cannot resolve host '{}': {}", host, reason);
  }
  return AddrInfoList(head);
}

void set_no_delay(int fd) {
  int one = 1;
  // Best effort: small request/reply frames should not wait for Nagle.
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

Result<short> wait_fd(int fd, short events, Deadline deadline) {
  for (;;) {
    auto left = deadline.remaining(Millis(INT32_MAX));
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, static_cast<int>(left.count()));
    if (rc > 0) return p.revents;
    if (rc == 0) {
      if (deadline.expired()) return short{0};
      continue;  // poll rounds down; wait out the rest
    }
    if (errno != EINTR) return make_error(PG_ERR_STORE, "poll: {}", errno_text(errno));
  }
}

Result<UniqueFd> connect_once(const sockaddr* addr, socklen_t len, Deadline deadline,
                              bool* refused) {
  if (refused != nullptr) *refused = false;
  UniqueFd fd(::socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return make_error(PG_ERR_STORE, "socket: {}", errno_text(errno));
  if (::connect(fd.get(), addr, len) != 0) {
    int err = errno;
    if (err == EINPROGRESS) {
      PG_ASSIGN_OR_RETURN(short revents, wait_fd(fd.get(), POLLOUT, deadline));
      if (revents == 0) return make_error(PG_ERR_TIMEOUT, "connect timed out");
      err = 0;
      socklen_t err_len = sizeof err;
      if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &err_len) != 0) err = errno;
    }
    if (err != 0) {
      if (refused != nullptr) *refused = err == ECONNREFUSED;
      return make_error(PG_ERR_STORE, "{}", errno_text(err));
    }
  }
  set_no_delay(fd.get());
  int one = 1;
  (void)setsockopt(fd.get(), SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  return fd;
}

Status send_all(int fd, std::span<const uint8_t> data, Deadline deadline) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      PG_ASSIGN_OR_RETURN(short revents, wait_fd(fd, POLLOUT, deadline));
      if (revents == 0) return make_error(PG_ERR_TIMEOUT, "timed out sending");
      continue;
    }
    return make_error(PG_ERR_STORE, "send failed: {}", errno_text(errno));
  }
  return ok_status();
}

Status recv_exact(int fd, std::span<uint8_t> out, Deadline deadline) {
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::recv(fd, out.data() + done, out.size() - done, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return make_error(PG_ERR_STORE, "connection closed by the store");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      PG_ASSIGN_OR_RETURN(short revents, wait_fd(fd, POLLIN, deadline));
      if (revents == 0) return make_error(PG_ERR_TIMEOUT, "timed out waiting for a reply");
      continue;
    }
    return make_error(PG_ERR_STORE, "receive failed: {}", errno_text(errno));
  }
  return ok_status();
}

Result<UniqueFd> IdleConnections::take_or_open(const std::function<Result<UniqueFd>()>& open,
                                               bool* reused) {
  if (reused != nullptr) *reused = false;
  for (;;) {
    UniqueFd fd;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (idle_.empty()) break;
      fd = std::move(idle_.back());
      idle_.pop_back();
    }
    // An idle connection has nothing to read: input means the server closed it (after an
    // error that ends the connection, say), so the request goes to another one.
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, 0) == 0) {
      if (reused != nullptr) *reused = true;
      return fd;
    }
  }
  return open();
}

void IdleConnections::give_back(UniqueFd fd) {
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.size() < max_idle_) idle_.push_back(std::move(fd));
}

}  // namespace procgroup::detail
