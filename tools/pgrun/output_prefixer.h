// LinePrefixer turns one rank's stdout or stderr byte stream into whole lines that start with
// "[rank R] ". pgrun is the only writer of its own stdout/stderr and writes each batch of whole
// lines with write_all before reading anything else, so lines of different ranks never mix
// mid-line, however the ranks split their writes.
//
//   LinePrefixer out("[rank 3] ", STDOUT_FILENO);
//   out.feed("hello\nwor");  // writes "[rank 3] hello\n"
//   out.feed("ld\n");        // writes "[rank 3] world\n"
//   out.finish();            // a partial last line would be written with a newline added
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace procgroup::pgrun {

class LinePrefixer {
 public:
  // A line longer than this is written in pieces of this size, each as its own line, so a rank
  // that never writes a newline cannot make pgrun buffer without bound.
  static constexpr std::size_t kMaxLine = std::size_t{64} * 1024;

  LinePrefixer(std::string prefix, int out_fd);

  void feed(std::string_view data);
  // Writes a pending partial line, terminated with a newline. Call at EOF.
  void finish();

 private:
  void append_line(std::string& out, std::string_view line) const;

  std::string prefix_;
  int out_fd_;
  std::string pending_;  // the current line's bytes, not yet ended by '\n'
};

// Writes all of data, retrying short writes and EINTR. Output whose reader has gone away
// (EPIPE) is dropped: losing a log line must not stop pgrun from supervising the ranks.
void write_all(int fd, std::string_view data);

}  // namespace procgroup::pgrun
