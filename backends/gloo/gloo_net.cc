// Listening address choice for the gloo TCP device (see gloo_net.h).
#include "gloo_net.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <memory>
#include <system_error>

namespace procgroup::gloo_backend {
namespace {

class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

bool is_loopback(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
  }
  return false;
}

Status config_error(const std::string& message) { return Status::error(PG_ERR_CONFIG, message); }

}  // namespace

Status choose_interface(const char* master_addr, NetChoice* out) {
  const char* ifname = std::getenv("PROCGROUP_SOCKET_IFNAME");
  if (ifname != nullptr && *ifname != '\0') {
    out->attr.iface = ifname;
    out->description = std::string("interface ") + ifname + " (PROCGROUP_SOCKET_IFNAME)";
    return {};
  }
  if (master_addr == nullptr || *master_addr == '\0') {
    out->attr.hostname = "127.0.0.1";
    out->description = "address 127.0.0.1 (no master address given)";
    return {};
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* raw = nullptr;
  const int rc = getaddrinfo(master_addr, "9", &hints, &raw);
  if (rc != 0) {
    return config_error(std::string("cannot resolve master address '") + master_addr +
                        "': " + gai_strerror(rc));
  }
  const std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> list(raw, &freeaddrinfo);
  if (is_loopback(list->ai_addr)) {
    out->attr.hostname = list->ai_family == AF_INET6 ? "::1" : "127.0.0.1";
    out->description = "address " + out->attr.hostname + " (master is loopback)";
    return {};
  }
  // Connecting a UDP socket sends nothing; it only asks the kernel for the route, whose
  // source address is the one the master (and so the other ranks) can reach us on.
  Socket sock(::socket(list->ai_family, SOCK_DGRAM, 0));
  if (sock.fd() < 0 || ::connect(sock.fd(), list->ai_addr, list->ai_addrlen) != 0) {
    return config_error(std::string("no route to master address '") + master_addr +
                        "': " + std::error_code(errno, std::generic_category()).message() +
                        "; set PROCGROUP_SOCKET_IFNAME");
  }
  sockaddr_storage local{};
  socklen_t len = sizeof(local);
  char host[NI_MAXHOST];
  if (::getsockname(sock.fd(), reinterpret_cast<sockaddr*>(&local), &len) != 0 ||
      getnameinfo(reinterpret_cast<sockaddr*>(&local), len, host, sizeof(host), nullptr, 0,
                  NI_NUMERICHOST) != 0) {
    return config_error(std::string("cannot find the local address that reaches '") + master_addr +
                        "'; set PROCGROUP_SOCKET_IFNAME");
  }
  out->attr.hostname = host;
  out->description = std::string("address ") + host + " (routes to " + master_addr + ")";
  return {};
}

ScopedSigpipeBlock::ScopedSigpipeBlock() {
  sigemptyset(&pipe_);
  sigaddset(&pipe_, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
}

ScopedSigpipeBlock::~ScopedSigpipeBlock() {
  if (sigismember(&old_, SIGPIPE)) return;  // it was blocked before: leave it so
  sigset_t pending;
  sigpending(&pending);
  if (sigismember(&pending, SIGPIPE)) {
    timespec zero{};
    sigtimedwait(&pipe_, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

void block_sigpipe_forever() {
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
}

}  // namespace procgroup::gloo_backend
