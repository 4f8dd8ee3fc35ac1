#include "spawn.h"

#include <spawn.h>
#include <unistd.h>

#include <string_view>

extern char** environ;

namespace procgroup::pgrun {
namespace {

// posix_spawn's C structures, released on every path.
class SpawnAttributes {
 public:
  SpawnAttributes() {
    posix_spawnattr_init(&attr_);
    posix_spawn_file_actions_init(&actions_);
  }
  ~SpawnAttributes() {
    posix_spawn_file_actions_destroy(&actions_);
    posix_spawnattr_destroy(&attr_);
  }
  SpawnAttributes(const SpawnAttributes&) = delete;
  SpawnAttributes& operator=(const SpawnAttributes&) = delete;

  posix_spawnattr_t* attr() { return &attr_; }
  posix_spawn_file_actions_t* actions() { return &actions_; }

 private:
  posix_spawnattr_t attr_;
  posix_spawn_file_actions_t actions_;
};

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (const std::string& s : strings) pointers.push_back(const_cast<char*>(s.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

std::string_view key_of(std::string_view entry) { return entry.substr(0, entry.find('=')); }

}  // namespace

SpawnResult spawn_process(const SpawnRequest& request) {
  SpawnResult result;
  SpawnAttributes spawn;
  int error = 0;
  const std::pair<int, int> redirects[] = {
      {request.stdin_fd, STDIN_FILENO},
      {request.stdout_fd, STDOUT_FILENO},
      {request.stderr_fd, STDERR_FILENO},
  };
  for (const auto& [from, to] : redirects) {
    if (from >= 0 && error == 0)
      error = posix_spawn_file_actions_adddup2(spawn.actions(), from, to);
  }

  sigset_t empty_mask;
  sigemptyset(&empty_mask);
  // pgrun ignores SIGPIPE so a closed stdout cannot kill it; the rank must not inherit that.
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  if (error == 0) {
    error = posix_spawnattr_setflags(
        spawn.attr(), POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  }
  if (error == 0) error = posix_spawnattr_setpgroup(spawn.attr(), 0);
  if (error == 0) {
    error = posix_spawnattr_setsigmask(
        spawn.attr(), request.signal_mask != nullptr ? request.signal_mask : &empty_mask);
  }
  if (error == 0) error = posix_spawnattr_setsigdefault(spawn.attr(), &defaults);
  if (error != 0) {
    result.error = error;
    return result;
  }

  std::vector<char*> argv = c_strings(request.argv);
  std::vector<char*> envp = c_strings(request.env);
  pid_t pid = -1;
  error = posix_spawnp(&pid, argv[0], spawn.actions(), spawn.attr(), argv.data(), envp.data());
  if (error != 0) {
    result.error = error;
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
