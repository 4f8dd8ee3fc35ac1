// Starts one rank with fork and execvpe: PATH lookup like a shell, its own process group (so
// pgrun can signal the rank together with its children, and a terminal's Ctrl-C reaches pgrun
// only), the given environment and standard streams, and SIGPIPE back at its default. The rank
// gets PR_SET_PDEATHSIG(SIGKILL), so it dies with pgrun even when pgrun is SIGKILLed and cannot
// stop it. A failed exec comes back as an error number, which becomes pgrun's "cannot execute"
// message.
//
//   SpawnRequest request{.argv = command, .env = env, .stdout_fd = pipe_write_end};
//   SpawnResult child = spawn_process(request);
//   if (child.error != 0) report(strerror(child.error));
#pragma once

#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace procgroup::pgrun {

struct SpawnRequest {
  std::vector<std::string> argv;          // argv[0] is looked up in PATH unless it has a '/'
  std::vector<std::string> env;           // "KEY=VALUE" entries, the complete environment
  const sigset_t* signal_mask = nullptr;  // the child's mask; nullptr: an empty mask
  int stdin_fd = -1;                      // -1: inherit pgrun's
  int stdout_fd = -1;                     // -1: inherit pgrun's
  int stderr_fd = -1;                     // -1: inherit pgrun's
  const rlimit* nofile_limit = nullptr;   // the child's RLIMIT_NOFILE; nullptr: pgrun's
  const cpu_set_t* cpus = nullptr;        // the child's CPU affinity; nullptr: pgrun's
};

struct SpawnResult {
  pid_t pid = -1;
  int error = 0;        // errno of the failed fork or exec; 0 on success
  bool forked = false;  // false: fork itself failed (no process was created)
};

SpawnResult spawn_process(const SpawnRequest& request);

// The environment pgrun was started with, with `overrides` (KEY=VALUE) replacing any entries of
// the same keys.
std::vector<std::string> environment_with(const std::vector<std::string>& overrides);

}  // namespace procgroup::pgrun
