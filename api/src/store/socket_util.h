// Owned file descriptors and small deadline-bounded socket helpers for the TCP store's
// client, server and tests. Nothing here blocks past its deadline.
//
//   PG_ASSIGN_OR_RETURN(UniqueFd fd, connect_once(addr, len, Deadline::after(Millis(500))));
//   PG_RETURN_IF_ERROR(send_all(fd.get(), frame, deadline));
#pragma once

#include <netdb.h>
#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <vector>
#include <string>
#include <string_view>
#include <utility>

#include "common/deadline.h"
#include "common/status.h"

namespace procgroup::detail {

// Closes the descriptor it owns.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// strerror for err, thread-safe.
std::string errno_text(int err);
// "host:port", or "[host]:port" when host is an IPv6 literal.
std::string host_port(std::string_view host, int port);
// Numeric "addr:port" of a socket address.
std::string sockaddr_text(const sockaddr* addr, socklen_t len);

// getaddrinfo results, freed on destruction.
class AddrInfoList {
 public:
  AddrInfoList() = default;
  explicit AddrInfoList(addrinfo* head) : head_(head) {}
  ~AddrInfoList();
  AddrInfoList(AddrInfoList&& other) noexcept : head_(std::exchange(other.head_, nullptr)) {}
  AddrInfoList& operator=(AddrInfoList&&) = delete;
  const addrinfo* head() const { return head_; }

 private:
  addrinfo* head_ = nullptr;
};

// Resolves host:port for TCP (passive: for bind). PG_ERR_STORE with gai's reason.
Result<AddrInfoList> resolve_tcp(const std::string& host, int port, bool passive);

void set_no_delay(int fd);

// Waits for events on fd; returns revents, or 0 when the deadline passed first.
Result<short> wait_fd(int fd, short events, Deadline deadline);
// Non-blocking connect to one address, bounded by deadline. PG_ERR_STORE with the reason;
// *refused (if given) says whether nothing listens there (ECONNREFUSED).
Result<UniqueFd> connect_once(const sockaddr* addr, socklen_t len, Deadline deadline,
                              bool* refused = nullptr);
// Writes all of data (fd non-blocking). PG_ERR_TIMEOUT at the deadline, PG_ERR_STORE when
// the connection breaks.
Status send_all(int fd, std::span<const uint8_t> data, Deadline deadline);
// Reads exactly out.size() bytes. PG_ERR_STORE "connection closed" at EOF.
Status recv_exact(int fd, std::span<uint8_t> out, Deadline deadline);

// A store client's idle connections, shared by its threads: each request takes one (or
// opens another when none is idle) and gives it back only after a clean reply, so a late
// reply never answers the next request.
class IdleConnections {
 public:
  explicit IdleConnections(size_t max_idle) : max_idle_(max_idle) {}
  // An idle connection the server has not closed, or a new one from open() when none is.
  // *reused (if given) says which.
  Result<UniqueFd> take_or_open(const std::function<Result<UniqueFd>()>& open,
                                bool* reused = nullptr);
  // Kept for the next request unless max_idle are idle already.
  void give_back(UniqueFd fd);

 private:
  const size_t max_idle_;
  std::mutex mu_;
  std::vector<UniqueFd> idle_;  // guarded by mu_
};

}  // namespace procgroup::detail
