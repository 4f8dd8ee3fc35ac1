// LinePrefixer turns one rank's stdout or stderr byte stream into whole lines that start with
// "[rank R] ". pgrun is the only writer of its own stdout/stderr and writes each batch of whole
// lines with write_all before reading anything else, so lines of different ranks never mix
// mid-line, however the ranks split their writes.
//
// A carriage return ends a segment too, so a progress bar redrawn in place ("\r" then the bar)
// reaches the terminal live: each segment is written as soon as its '\r' arrives, and the text
// after a '\r' is written at once, followed by a '\r' of pgrun's own. Every write still ends
// with '\n' or '\r', so the next rank's line starts at column 0 (on a terminal it overwrites
// the bar, as without a launcher).
//
//   LinePrefixer out("[rank 3] ", STDOUT_FILENO);
//   out.feed("hello\nwor");  // writes "[rank 3] hello\n"
//   out.feed("ld\n");        // writes "[rank 3] world\n"
//   out.feed("\rstep 1");    // writes "[rank 3] step 1\r"
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

  // The longest text after a '\r' that is written before its segment ends; more than any
  // terminal line, and it bounds how often a rank writing byte by byte makes pgrun rewrite it.
  static constexpr std::size_t kMaxShownTail = 4096;

  void feed(std::string_view data);
  // Writes a pending partial line, terminated with a newline. Call at EOF.
  void finish();

 private:
  void append_line(std::string& out, std::string_view line, std::string_view ending) const;
  void end_segment(std::string& out, std::string_view rest, std::string_view ending);

  std::string prefix_;
  int out_fd_;
  std::string pending_;     // the current segment's bytes, not yet ended by '\n' or '\r'
  bool in_redraw_ = false;  // the last segment ended with '\r': pending_ redraws a line
  bool shown_ = false;      // pending_ is on the output already, followed by our own '\r'
  bool after_cr_ = false;   // the last write ended with '\r', so a '\n' now completes "\r\n"
};

// Writes all of data, retrying short writes and EINTR. Output whose reader has gone away
// (EPIPE) is dropped: losing a log line must not stop pgrun from supervising the ranks.
void write_all(int fd, std::string_view data);

}  // namespace procgroup::pgrun
