#include "output_prefixer.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace procgroup::pgrun {

LinePrefixer::LinePrefixer(std::string prefix, int out_fd)
    : prefix_(std::move(prefix)), out_fd_(out_fd) {}

void LinePrefixer::append_line(std::string& out, std::string_view line) const {
  out.append(prefix_);
  out.append(line);
  out.push_back('\n');
}

void LinePrefixer::feed(std::string_view data) {
  std::string out;
  while (!data.empty()) {
    const std::size_t newline = data.find('\n');
    if (newline == std::string_view::npos) {
      pending_.append(data);
      break;
    }
    if (pending_.empty()) {
      append_line(out, data.substr(0, newline));
    } else {
      pending_.append(data.substr(0, newline));
      append_line(out, pending_);
      pending_.clear();
    }
    data.remove_prefix(newline + 1);
  }
  while (pending_.size() >= kMaxLine) {
    append_line(out, std::string_view(pending_).substr(0, kMaxLine));
    pending_.erase(0, kMaxLine);
  }
  if (!out.empty()) write_all(out_fd_, out);
}

void LinePrefixer::finish() {
  if (pending_.empty()) return;
  std::string out;
  append_line(out, pending_);
  pending_.clear();
  write_all(out_fd_, out);
}

void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        // An inherited non-blocking stdout: wait until it drains instead of dropping lines.
        pollfd pfd{fd, POLLOUT, 0};
        ::poll(&pfd, 1, -1);
        continue;
      }
      return;  // EPIPE, EBADF, ...: nobody to tell, keep supervising
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace procgroup::pgrun
