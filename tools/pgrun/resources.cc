#include "resources.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace procgroup::pgrun {
namespace {

// Descriptors pgrun holds per rank while it runs: the read ends of its stdout and stderr pipes.
constexpr long long kFdsPerPrefixedRank = 2;
// Held only while one rank starts (its two pipe write ends, the exec-report pipe), plus room
// for what libc or a future pgrun opens on the way.
constexpr long long kFdsSpare = 4 + 16;

long long open_fds_now() {
  std::error_code ec;
  long long count = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++count;
  }
  // The iterator's own descriptor was counted; without /proc assume a few beyond stdio.
  return ec || count == 0 ? 3 + 8 : count - 1;
}

// The first number in a file such as /proc/sys/kernel/pid_max; nullopt when it is absent or
// not a number (e.g. pids.max holding "max").
std::optional<long long> read_number(const std::filesystem::path& path) {
  std::ifstream in(path);
  long long value = 0;
  if (in >> value) return value;
  return std::nullopt;
}

// Tasks (threads included) that exist now: the 4th field of /proc/loadavg is "running/total".
std::optional<long long> tasks_now() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c, running_total;
  if (!(in >> a >> b >> c >> running_total)) return std::nullopt;
  const auto slash = running_total.find('/');
  if (slash == std::string::npos) return std::nullopt;
  return std::stoll(running_total.substr(slash + 1));
}

// The pids controller's folder of pgrun's own cgroup (v2 "0::/path" or v1 "N:...pids...:/path").
std::optional<std::filesystem::path> pids_cgroup() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const auto first = line.find(':');
    const auto second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    std::filesystem::path dir;
    if (line.starts_with("0::")) {
      dir = std::filesystem::path("/sys/fs/cgroup") / path.substr(1);
    } else if (("," + controllers + ",").find(",pids,") != std::string::npos) {
      dir = std::filesystem::path("/sys/fs/cgroup/pids") / path.substr(1);
    } else {
      continue;
    }
    if (std::filesystem::exists(dir / "pids.max")) return dir;
  }
  return std::nullopt;
}

std::string cannot_start(int ranks) {
  return "cannot start " + std::to_string(ranks) + " rank" + (ranks == 1 ? "" : "s") + ": ";
}

// Raises the soft RLIMIT_NOFILE when pgrun's descriptors would not fit under it.
std::string plan_descriptors(int ranks, bool prefix_output, ResourcePlan& plan) {
  const long long per_rank = prefix_output ? kFdsPerPrefixedRank : 0;
  const long long needed = open_fds_now() + per_rank * ranks + kFdsSpare;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return "";  // nothing known: let spawning tell
  if (limit.rlim_cur == RLIM_INFINITY || static_cast<long long>(limit.rlim_cur) >= needed) {
    return "";
  }
  if (limit.rlim_max != RLIM_INFINITY && static_cast<long long>(limit.rlim_max) < needed) {
    return cannot_start(ranks) + "pgrun needs about " + std::to_string(needed) +
           " open files (2 per rank for its output pipes) but RLIMIT_NOFILE allows at most " +
           std::to_string(limit.rlim_max) +
           " (ulimit -Hn); start fewer ranks, raise the limit, or pass --no-prefix";
  }
  rlimit raised = limit;
  raised.rlim_cur = static_cast<rlim_t>(needed);
  if (::setrlimit(RLIMIT_NOFILE, &raised) != 0) {
    return cannot_start(ranks) + "pgrun needs about " + std::to_string(needed) +
           " open files but cannot raise RLIMIT_NOFILE from " + std::to_string(limit.rlim_cur) +
           ": " + std::strerror(errno);
  }
  plan.child_nofile = limit;
  return "";
}

std::string check_processes(int ranks) {
  // The kernel does not apply RLIMIT_NPROC to root; other processes of the user count too, so
  // this catches only a limit that cannot fit pgrun and its ranks at all.
  rlimit nproc{};
  if (::getuid() != 0 && ::getrlimit(RLIMIT_NPROC, &nproc) == 0 &&
      nproc.rlim_cur != RLIM_INFINITY && static_cast<long long>(nproc.rlim_cur) < ranks + 1LL) {
    return cannot_start(ranks) + "RLIMIT_NPROC (ulimit -u) allows " +
           std::to_string(nproc.rlim_cur) + " processes for this user, pgrun included";
  }
  if (const auto dir = pids_cgroup()) {
    const auto max = read_number(*dir / "pids.max");
    const auto current = read_number(*dir / "pids.current");
    if (max && current && *max - *current < ranks) {
      return cannot_start(ranks) + "the cgroup " + dir->string() + " has room for " +
             std::to_string(*max - *current) + " more processes (pids.max " + std::to_string(*max) +
             ")";
    }
  }
  const auto pid_max = read_number("/proc/sys/kernel/pid_max");
  const auto threads_max = read_number("/proc/sys/kernel/threads-max");
  const auto tasks = tasks_now();
  if (pid_max && threads_max && tasks) {
    const long long room = std::min(*pid_max, *threads_max) - *tasks;
    if (room < ranks) {
      return cannot_start(ranks) + "the kernel has room for " + std::to_string(room) +
             " more processes (pid_max " + std::to_string(*pid_max) + ", threads-max " +
             std::to_string(*threads_max) + ", " + std::to_string(*tasks) + " running)";
    }
  }
  return "";
}

}  // namespace

ResourcePlan plan_resources(int ranks, bool prefix_output) {
  ResourcePlan plan;
  plan.error = check_processes(ranks);
  if (plan.error.empty()) plan.error = plan_descriptors(ranks, prefix_output, plan);
  return plan;
}

}  // namespace procgroup::pgrun
