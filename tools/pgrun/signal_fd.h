// SignalFd turns the signals pgrun reacts to (SIGCHLD, and the ones it forwards to ranks) into
// readable events on one descriptor, so the output poll loop also supervises the ranks and no
// signal handler or global state is needed. The signals are blocked while a SignalFd lives;
// ranks must be started with the original mask (original_mask()), or they would inherit the
// block and never see a forwarded SIGTERM.
//
//   SignalFd signals;                       // blocks SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT
//   poll({signals.fd(), POLLIN}, ...);
//   for (int sig : signals.read_pending()) { ... }
#pragma once

#include <signal.h>

#include <string>
#include <vector>

#include "unique_fd.h"

namespace procgroup::pgrun {

// The signals pgrun passes on to the ranks, as torchrun does.
inline constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

class SignalFd {
 public:
  SignalFd();  // throws std::system_error when the kernel refuses
  ~SignalFd();
  SignalFd(const SignalFd&) = delete;
  SignalFd& operator=(const SignalFd&) = delete;

  int fd() const { return fd_.get(); }
  const sigset_t& original_mask() const { return original_mask_; }
  // The signals delivered since the last call, in arrival order (repeats of one kind while
  // pending are merged by the kernel, which is fine: SIGCHLD means "reap everything").
  std::vector<int> read_pending();

 private:
  sigset_t original_mask_;
  UniqueFd fd_;
};

// "SIGTERM" for 15; "signal 42" for one without a name.
std::string signal_name(int sig);

}  // namespace procgroup::pgrun
