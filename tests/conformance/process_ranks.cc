// Ranks as processes: this binary re-executed once per rank, bounded by a wall clock.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "rank_runner.h"
#include "temp_dir.h"

extern char** environ;

namespace pgtest {
namespace {

constexpr int kExitSetupFailed = 2;  // the group could not be created
constexpr const char* kDirVar = "PGCONF_DIR";
constexpr const char* kParentVar = "PGCONF_PARENT_PID";

// A port on 127.0.0.1 that was free a moment ago (bound, never listened on, released).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  if (fd >= 0) ::close(fd);
  return port;
}

// One rank process; killed and reaped on destruction if still running.
class RankProcess {
 public:
  RankProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env,
              const std::string& log_path) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    std::vector<char*> args, envp;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    args.push_back(nullptr);
    envp.push_back(nullptr);
    error_ = posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (error_ != 0) pid_ = -1;
  }
  ~RankProcess() { kill(); }
  RankProcess(const RankProcess&) = delete;
  RankProcess& operator=(const RankProcess&) = delete;

  int spawn_error() const { return error_; }
  bool running() const { return pid_ > 0; }
  // Reaps the process if it has exited; false while it runs.
  bool poll() {
    if (pid_ <= 0) return true;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) != pid_) return false;
    pid_ = -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    signal_ = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    return true;
  }
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    killed_ = true;
  }
  int exit_code() const { return exit_code_; }
  int signal() const { return signal_; }
  bool killed() const { return killed_; }

 private:
  pid_t pid_ = -1;
  int error_ = 0, exit_code_ = -1, signal_ = 0;
  bool killed_ = false;
};

std::string key_of(const std::string& entry) { return entry.substr(0, entry.find('=')); }

// This process's environment with `overrides` replacing (or adding) their keys.
std::vector<std::string> environment(const std::vector<std::string>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    bool replaced = false;
    for (const std::string& o : overrides) replaced = replaced || key_of(o) == key_of(*e);
    if (!replaced) env.emplace_back(*e);
  }
  env.insert(env.end(), overrides.begin(), overrides.end());
  return env;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Turns a rank's exit and log into its outcome.
RankOutcome outcome_of(int rank, const RankProcess& p, const std::string& log,
                       const std::string& kill_reason) {
  RankOutcome o;
  o.rank = rank;
  std::string last_step, tail;
  std::vector<std::string> other_lines;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("pgconf-fail ", 0) == 0) {
      o.problems.push_back(line.substr(12));
    } else if (line.rfind("pgconf-step ", 0) == 0) {
      last_step = line.substr(12);
    } else if (Report::parse_done_line(line, &o.checks, &o.failures, &o.summary)) {
      o.reported = true;
    } else if (o.tally.parse_line(line)) {
    } else {
      other_lines.push_back(line);
    }
  }
  for (size_t i = other_lines.size() > 25 ? other_lines.size() - 25 : 0; i < other_lines.size();
       ++i)
    tail += "\n    | " + other_lines[i];
  const std::string context = (last_step.empty() ? "" : "; its last step: " + last_step) +
                              (tail.empty() ? "" : "; its other output:" + tail);
  if (p.killed()) {
    o.problems.push_back(kill_reason + context);
  } else if (p.signal() != 0) {
    o.problems.push_back("died of signal " + std::to_string(p.signal()) + " (" +
                         strsignal(p.signal()) + ")" + context);
  } else if (p.exit_code() != 0 && o.failures == 0) {
    o.problems.push_back("exited with status " + std::to_string(p.exit_code()) + context);
  } else if (!o.reported) {
    o.problems.push_back("exited without reporting its results" + context);
  }
  if (o.failures > static_cast<int>(o.problems.size()))
    o.problems.push_back("... " + std::to_string(o.failures) + " failures in all");
  return o;
}

}  // namespace

std::vector<RankOutcome> run_in_processes(const BackendSpec& backend, int world,
                                          const Scenario& scenario, const std::string& self_exe) {
  TempDir dir;
  std::vector<RankOutcome> outcomes(world);
  if (!dir.ok()) {
    outcomes[0].problems.push_back("cannot create a temporary directory");
    return outcomes;
  }
  // A port taken by someone else between our release and rank 0's bind is a setup
  // failure naming the store: try once more with a new port.
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int port = free_port();
    char timeout[32];
    std::snprintf(timeout, sizeof(timeout), "%g", scenario.group_timeout_s);
    std::vector<std::unique_ptr<RankProcess>> ranks;
    for (int rank = 0; rank < world; ++rank) {
      std::vector<std::string> overrides = backend.env;
      overrides.insert(
          overrides.end(),
          {"RANK=" + std::to_string(rank), "WORLD_SIZE=" + std::to_string(world),
           "LOCAL_RANK=" + std::to_string(rank), "LOCAL_WORLD_SIZE=" + std::to_string(world),
           "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port),
           "PROCGROUP_BACKEND=" + backend.plugin, std::string("PROCGROUP_TIMEOUT=") + timeout,
           std::string(kDirVar) + "=" + dir.path(),
           std::string(kParentVar) + "=" + std::to_string(::getpid())});
      const std::vector<std::string> env = environment(overrides);
      ranks.push_back(std::make_unique<RankProcess>(
          std::vector<std::string>{self_exe, "--conformance-worker", scenario.name}, env,
          dir.path() + "/rank" + std::to_string(rank) + ".log"));
      if (ranks.back()->spawn_error() != 0) {
        outcomes[rank].problems.push_back("cannot start " + self_exe + ": " +
                                          std::strerror(ranks.back()->spawn_error()));
        return outcomes;
      }
    }
    // The others wait for a rank that could not create the group up to the group timeout:
    // stop them shortly after.
    using Clock = std::chrono::steady_clock;
    auto deadline = Clock::now() + std::chrono::duration<double>(scenario.wall_s);
    std::string kill_reason = "still running after the " +
                              std::to_string(static_cast<int>(scenario.wall_s)) +
                              " s bound: killed";
    for (bool all_done = false; !all_done;) {
      all_done = true;
      for (int rank = 0; rank < world; ++rank) {
        if (!ranks[rank]->poll()) {
          all_done = false;
        } else if (ranks[rank]->exit_code() == kExitSetupFailed &&
                   deadline > Clock::now() + std::chrono::seconds(3)) {
          deadline = Clock::now() + std::chrono::seconds(3);
          kill_reason =
              "killed 3 s after rank " + std::to_string(rank) + " failed to create the group";
        }
      }
      if (all_done) break;
      if (Clock::now() > deadline) {
        for (auto& r : ranks) r->kill();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const std::string log0 = read_text(dir.path() + "/rank0.log");
    if (attempt == 0 && ranks[0]->exit_code() == kExitSetupFailed &&
        log0.find("PG_ERR_STORE") != std::string::npos)
      continue;
    for (int rank = 0; rank < world; ++rank)
      outcomes[rank] =
          outcome_of(rank, *ranks[rank],
                     read_text(dir.path() + "/rank" + std::to_string(rank) + ".log"), kill_reason);
    break;
  }
  return outcomes;
}

int worker_main(const std::string& scenario_name) {
  // Die with the parent test, even if it is killed (a ctest timeout).
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  const char* parent = std::getenv(kParentVar);
  if (parent == nullptr || std::to_string(::getppid()) != parent) {
    std::printf("conformance worker: not started by a conformance test (no parent %s)\n",
                kParentVar);
    return kExitSetupFailed;
  }
  const Scenario* scenario = find_scenario(scenario_name);
  if (scenario == nullptr) {
    std::printf("conformance worker: no scenario named '%s'\n", scenario_name.c_str());
    return kExitSetupFailed;
  }
  RankContext ctx;
  ctx.dir = std::getenv(kDirVar) ? std::getenv(kDirVar) : ".";
  ctx.processes = true;
  ctx.group_timeout_s = scenario->group_timeout_s;
  ctx.report.echo_to(stdout);
  pg_group_t group = nullptr;
  const pg_status_t s = pg_group_create(nullptr, &group);
  if (s != PG_OK) {
    std::printf("pgconf-fail pg_group_create from the environment: %s: %s\n", pg_status_name(s),
                pg_last_error());
    return kExitSetupFailed;
  }
  ctx.rank = std::atoi(std::getenv("RANK") ? std::getenv("RANK") : "-1");
  ctx.size = std::atoi(std::getenv("WORLD_SIZE") ? std::getenv("WORLD_SIZE") : "-1");
  run_rank(ctx, *scenario, group);
  for (const std::string& line : ctx.report.tally().lines()) std::printf("%s\n", line.c_str());
  std::printf("%s\n", ctx.report.done_line().c_str());
  std::fflush(stdout);
  return ctx.report.failures() == 0 ? 0 : 1;
}

}  // namespace pgtest
