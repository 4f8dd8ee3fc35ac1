#include "signal_fd.h"

#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace procgroup::pgrun {

SignalFd::SignalFd() {
  sigset_t wanted;
  sigemptyset(&wanted);
  sigaddset(&wanted, SIGCHLD);
  for (int sig : kForwardedSignals) sigaddset(&wanted, sig);
  if (sigprocmask(SIG_BLOCK, &wanted, &original_mask_) != 0) {
    throw std::system_error(errno, std::generic_category(), "sigprocmask");
  }
  fd_.reset(::signalfd(-1, &wanted, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!fd_.valid()) {
    const int error = errno;
    sigprocmask(SIG_SETMASK, &original_mask_, nullptr);
    throw std::system_error(error, std::generic_category(), "signalfd");
  }
}

SignalFd::~SignalFd() {
  // Close first: unblocking with the descriptor open would let pending signals take their
  // default action (e.g. terminate pgrun after it already decided its exit code).
  fd_.reset();
  sigset_t still_pending;
  sigpending(&still_pending);
  for (int sig : kForwardedSignals) {
    if (sigismember(&still_pending, sig) == 1) {
      // Swallow them: pgrun already acted on every forwarded signal it was sent.
      sigset_t one;
      sigemptyset(&one);
      sigaddset(&one, sig);
      timespec zero{};
      sigtimedwait(&one, nullptr, &zero);
    }
  }
  sigprocmask(SIG_SETMASK, &original_mask_, nullptr);
}

std::vector<int> SignalFd::read_pending() {
  std::vector<int> signals;
  signalfd_siginfo info;
  while (true) {
    const ssize_t n = ::read(fd_.get(), &info, sizeof(info));
    if (n == static_cast<ssize_t>(sizeof(info))) {
      signals.push_back(static_cast<int>(info.ssi_signo));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;  // EAGAIN: drained
  }
  return signals;
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  if (abbrev != nullptr) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(sig);
}

}  // namespace procgroup::pgrun
