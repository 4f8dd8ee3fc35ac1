// UniqueFd: owns one POSIX file descriptor and closes it on destruction, so no early return
// or exception path in pgrun can leak a pipe end into a rank (a leaked write end would keep
// the output loop waiting for an EOF that never comes).
//
//   UniqueFd fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
//   if (!fd.valid()) { ... }
#pragma once

#include <unistd.h>

#include <utility>

namespace procgroup::pgrun {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }

  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    // close() is not retried on EINTR: on Linux the descriptor is released either way.
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace procgroup::pgrun
