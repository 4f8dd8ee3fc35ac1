#include "spawn.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>

#include "unique_fd.h"

extern char** environ;

namespace procgroup::pgrun {
namespace {

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (const std::string& s : strings) pointers.push_back(const_cast<char*>(s.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

std::string_view key_of(std::string_view entry) { return entry.substr(0, entry.find('=')); }

// In the child: tells the parent why it could not become the rank, and exits.
[[noreturn]] void report_and_exit(int report_fd, int error) {
  while (::write(report_fd, &error, sizeof(error)) < 0 && errno == EINTR) {
  }
  ::_exit(127);
}

// The child between fork and exec: async-signal-safe calls only. Reports a failure's errno on
// report_fd (close-on-exec, so a successful exec reports nothing) and never returns.
[[noreturn]] void become_rank(const SpawnRequest& request, pid_t launcher, char** argv, char** envp,
                              int report_fd) {
  auto fail = [report_fd](int error) { report_and_exit(report_fd, error); };
  // Die with pgrun. If pgrun died before prctl took effect, we were already re-parented and
  // the death signal will never come: check the parent after setting it.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(errno);
  if (::getppid() != launcher) ::_exit(128 + SIGKILL);
  if (::setpgid(0, 0) != 0) fail(errno);
  const int redirects[][2] = {
      {request.stdin_fd, STDIN_FILENO},
      {request.stdout_fd, STDOUT_FILENO},
      {request.stderr_fd, STDERR_FILENO},
  };
  for (const auto& [from, to] : redirects) {
    if (from < 0) continue;
    // dup2 onto itself keeps close-on-exec set; clear it so the stream survives exec.
    const int result = from == to ? ::fcntl(to, F_SETFD, 0) : ::dup2(from, to);
    if (result < 0) fail(errno);
  }
  // pgrun ignores SIGPIPE so a closed stdout cannot kill it; the rank must not inherit that.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  if (::sigaction(SIGPIPE, &default_action, nullptr) != 0) fail(errno);
  sigset_t empty_mask;
  sigemptyset(&empty_mask);
  const sigset_t* mask = request.signal_mask != nullptr ? request.signal_mask : &empty_mask;
  if (::sigprocmask(SIG_SETMASK, mask, nullptr) != 0) fail(errno);
  if (request.nofile_limit != nullptr && ::setrlimit(RLIMIT_NOFILE, request.nofile_limit) != 0) {
    fail(errno);
  }
  if (request.cpus != nullptr && ::sched_setaffinity(0, sizeof(cpu_set_t), request.cpus) != 0) {
    fail(errno);
  }
  ::execvpe(argv[0], argv, envp);
  report_and_exit(report_fd, errno);
}

}  // namespace

SpawnResult spawn_process(const SpawnRequest& request) {
  SpawnResult result;
  // Everything the child needs is prepared here: after fork it may not allocate.
  std::vector<char*> argv = c_strings(request.argv);
  std::vector<char*> envp = c_strings(request.env);
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    result.error = errno;
    return result;
  }
  UniqueFd report_read(report[0]);
  UniqueFd report_write(report[1]);
  const pid_t launcher = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    result.error = errno;
    return result;
  }
  if (pid == 0) become_rank(request, launcher, argv.data(), envp.data(), report_write.get());
  result.forked = true;
  report_write.reset();  // so the read below ends at the child's exec or exit

  int child_error = 0;
  ssize_t n = 0;
  do {
    n = ::read(report_read.get(), &child_error, sizeof(child_error));
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof(child_error))) {
    // The child exits at once; reap it here so the caller never sees this pid.
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    result.error = child_error;
    return result;
  }
  result.pid = pid;
  return result;
}

std::vector<std::string> environment_with(const std::vector<std::string>& overrides) {
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view key = key_of(*entry);
    bool replaced = false;
    for (const std::string& o : overrides) replaced = replaced || key_of(o) == key;
    if (!replaced) env.emplace_back(*entry);
  }
  env.insert(env.end(), overrides.begin(), overrides.end());
  return env;
}

}  // namespace procgroup::pgrun
