#include "output_prefixer.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace procgroup::pgrun {

LinePrefixer::LinePrefixer(std::string prefix, int out_fd)
    : prefix_(std::move(prefix)), out_fd_(out_fd) {}

void LinePrefixer::append_line(std::string& out, std::string_view line,
                               std::string_view ending) const {
  out.append(prefix_);
  out.append(line);
  out.append(ending);
}

// Ends the segment pending_ + rest with ending: "\n", "\r\n" or "\r".
void LinePrefixer::end_segment(std::string& out, std::string_view rest, std::string_view ending) {
  const bool empty = pending_.empty() && rest.empty();
  if (ending == "\r") {
    // Empty, or already shown: the cursor is at column 0 after the previous write anyway.
    const bool on_output = empty || (shown_ && rest.empty());
    if (!on_output) {
      pending_.append(rest);
      append_line(out, pending_, ending);
    }
    after_cr_ = after_cr_ || !empty;
    in_redraw_ = true;
  } else {
    if (empty && after_cr_ && ending == "\n") {
      out.append("\n");  // the '\n' of a "\r\n" that arrived in two reads
    } else {
      pending_.append(rest);
      append_line(out, pending_, ending);
    }
    after_cr_ = false;
    in_redraw_ = false;
  }
  pending_.clear();
  shown_ = false;
}

void LinePrefixer::feed(std::string_view data) {
  std::string out;
  while (!data.empty()) {
    const std::size_t end = data.find_first_of("\r\n");
    if (end == std::string_view::npos) {
      pending_.append(data);
      shown_ = false;
      break;
    }
    const bool crlf = data[end] == '\r' && end + 1 < data.size() && data[end + 1] == '\n';
    const std::string_view ending = crlf ? "\r\n" : data[end] == '\r' ? "\r" : "\n";
    end_segment(out, data.substr(0, end), ending);
    data.remove_prefix(end + ending.size());
  }
  while (pending_.size() >= kMaxLine) {
    append_line(out, std::string_view(pending_).substr(0, kMaxLine), "\n");
    pending_.erase(0, kMaxLine);
    in_redraw_ = after_cr_ = false;
  }
  if (in_redraw_ && !shown_ && !pending_.empty() && pending_.size() <= kMaxShownTail) {
    append_line(out, pending_, "\r");
    shown_ = after_cr_ = true;
  }
  if (!out.empty()) write_all(out_fd_, out);
}

void LinePrefixer::finish() {
  if (pending_.empty()) return;
  std::string out;
  append_line(out, pending_, "\n");
  pending_.clear();
  shown_ = in_redraw_ = after_cr_ = false;
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
