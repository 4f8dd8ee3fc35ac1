#include "launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "cpu_binding.h"
#include "output_prefixer.h"
#include "resources.h"
#include "signal_fd.h"
#include "spawn.h"
#include "store_token.h"
#include "unique_fd.h"

namespace procgroup::pgrun {
namespace {

using Clock = std::chrono::steady_clock;

// After the last rank exits, how long to keep copying output that its children (which inherited
// the pipes) still write before pgrun stops reading and returns.
constexpr auto kDrainAfterExit = std::chrono::seconds(2);
constexpr std::size_t kReadChunk = std::size_t{64} * 1024;
// Reads per stream when a rank exits, so its last lines come out before pgrun's report on it;
// bounded because a surviving child of the rank could keep the pipe full forever.
constexpr int kMaxDrainReads = 32;

constexpr int kCannotFindExitCode = 127;     // as shells: command not found
constexpr int kCannotExecuteExitCode = 126;  // as shells: found but not executable

struct Stream {
  UniqueFd fd;  // our read end, non-blocking
  std::optional<LinePrefixer> prefixer;
  bool open() const { return fd.valid(); }
};

struct Rank {
  int local_rank = 0;
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  Stream streams[2];  // stdout, stderr
};

void say(const std::string& line) { write_all(STDERR_FILENO, "pgrun: " + line + "\n"); }

int shell_exit_code(int wait_status) {
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return WEXITSTATUS(wait_status);
}

std::string describe(int wait_status) {
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    return "was killed by signal " + std::to_string(sig) + " (" + signal_name(sig) +
           "), exit code " + std::to_string(128 + sig);
  }
  return "exited with code " + std::to_string(WEXITSTATUS(wait_status));
}

std::string seconds_text(double seconds) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", seconds);
  return buffer;
}

class Supervisor {
 public:
  Supervisor(const Options& options, int master_port)
      : options_(options), master_port_(master_port) {}

  int run() {
    start_ranks();
    while (any_running() || any_output_open()) step();
    return exit_code_.value_or(0);
  }

  // Called when run() throws: no rank may outlive pgrun unsupervised.
  void kill_all() { signal_groups(SIGKILL); }

 private:
  void start_ranks();
  void step();
  void reap();
  void on_exit(Rank& rank, int wait_status);
  void on_signal(int sig);
  void begin_stop(int sig);
  void signal_groups(int sig);
  bool read_once(Stream& stream);  // false once the stream is closed or has nothing now
  void close_stream(Stream& stream);
  void on_deadlines();
  int poll_timeout_ms() const;

  bool any_running() const {
    return std::ranges::any_of(ranks_, [](const Rank& r) { return r.running; });
  }
  bool any_output_open() const {
    return std::ranges::any_of(
        ranks_, [](const Rank& r) { return r.streams[0].open() || r.streams[1].open(); });
  }

  const Options& options_;
  const int master_port_;
  SignalFd signals_;
  std::vector<Rank> ranks_;
  std::optional<int> exit_code_;  // set by the first failure only
  bool stopping_ = false;
  bool killed_ = false;
  int stop_signal_ = SIGTERM;
  Clock::time_point kill_deadline_;
  std::optional<Clock::time_point> drain_deadline_;
};

void Supervisor::start_ranks() {
  // Before anything is allocated or forked: a job that cannot fit must not start a single rank.
  const ResourcePlan resources = plan_resources(options_.nproc_per_node, options_.prefix_output);
  if (!resources.error.empty()) {
    say(resources.error);
    exit_code_ = 1;
    return;
  }
  // Rank 0 gets pgrun's stdin like mpirun's rank 0, but not a terminal: a rank in its own
  // process group reading the terminal would be stopped by SIGTTIN.
  UniqueFd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const bool share_stdin = ::isatty(STDIN_FILENO) == 0;
  const int world_size = options_.nnodes * options_.nproc_per_node;
  ranks_.resize(static_cast<std::size_t>(options_.nproc_per_node));
  const TokenDecision token = decide_store_token(options_);
  if (!token.note.empty()) say("note: " + token.note);
  if (!token.error.empty()) {
    say(token.error);
    exit_code_ = 1;
    return;
  }

  CpuBinding binding;
  if (options_.bind_to == BindMode::kCore) {
    binding = plan_cpu_binding(options_.nproc_per_node);
    if (!binding.error.empty()) {
      say(binding.error);
      exit_code_ = 1;
      return;
    }
    say("note: --bind-to core: " +
        describe_binding(binding, options_.node_rank * options_.nproc_per_node));
  }

  for (int local = 0; local < options_.nproc_per_node; ++local) {
    Rank& rank = ranks_[static_cast<std::size_t>(local)];
    rank.local_rank = local;
    rank.rank = options_.node_rank * options_.nproc_per_node + local;

    SpawnRequest request;
    request.argv = options_.command;
    std::vector<std::string> overrides{
        "RANK=" + std::to_string(rank.rank),
        "WORLD_SIZE=" + std::to_string(world_size),
        "LOCAL_RANK=" + std::to_string(local),
        "LOCAL_WORLD_SIZE=" + std::to_string(options_.nproc_per_node),
        "GROUP_RANK=" + std::to_string(options_.node_rank),
        "NODE_RANK=" + std::to_string(options_.node_rank),
        "MASTER_ADDR=" + options_.master_addr,
        "MASTER_PORT=" + std::to_string(master_port_),
    };
    if (!token.env_entry.empty()) overrides.push_back(token.env_entry);
    request.env = environment_with(overrides);
    request.signal_mask = &signals_.original_mask();
    if (resources.child_nofile) request.nofile_limit = &*resources.child_nofile;
    if (local != 0 || !share_stdin) request.stdin_fd = dev_null.get();
    if (!binding.sets.empty()) request.cpus = &binding.sets[static_cast<std::size_t>(local)];

    UniqueFd write_ends[2];
    if (options_.prefix_output) {
      for (int s = 0; s < 2; ++s) {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0) {
          say("cannot create an output pipe for rank " + std::to_string(rank.rank) + ": " +
              std::strerror(errno));
          exit_code_ = 1;
          begin_stop(SIGTERM);
          return;
        }
        rank.streams[s].fd.reset(fds[0]);
        write_ends[s].reset(fds[1]);
        ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
        rank.streams[s].prefixer.emplace("[rank " + std::to_string(rank.rank) + "] ",
                                         s == 0 ? STDOUT_FILENO : STDERR_FILENO);
      }
      request.stdout_fd = write_ends[0].get();
      request.stderr_fd = write_ends[1].get();
    }

    const SpawnResult child = spawn_process(request);
    if (child.error != 0) {
      rank.streams[0] = Stream{};
      rank.streams[1] = Stream{};
      if (!child.forked) {
        // Out of processes or memory: the ranks started so far cannot run the job alone.
        say("cannot start rank " + std::to_string(rank.rank) +
            ": fork: " + std::strerror(child.error));
        exit_code_ = 1;
      } else {
        // The same program for every rank: if one cannot start, none can run the job.
        say("cannot execute " + options_.command.front() + ": " + std::strerror(child.error));
        exit_code_ = (child.error == ENOENT || child.error == ENOTDIR) ? kCannotFindExitCode
                                                                       : kCannotExecuteExitCode;
      }
      begin_stop(SIGTERM);
      return;
    }
    rank.pid = child.pid;
    rank.running = true;
    // write_ends close here: the rank holds the only write ends, so its exit gives us EOF.
  }
}

void Supervisor::step() {
  std::vector<pollfd> fds;
  std::vector<Stream*> owners;  // owners[i] for fds[i + 1]
  fds.push_back({signals_.fd(), POLLIN, 0});
  for (Rank& r : ranks_) {
    for (Stream& s : r.streams) {
      if (!s.open()) continue;
      fds.push_back({s.fd.get(), POLLIN, 0});
      owners.push_back(&s);
    }
  }
  const int ready = ::poll(fds.data(), fds.size(), poll_timeout_ms());
  if (ready < 0 && errno != EINTR) throw std::system_error(errno, std::generic_category(), "poll");

  if (ready > 0) {
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents != 0) read_once(*owners[i - 1]);
    }
    if (fds[0].revents != 0) {
      for (int sig : signals_.read_pending()) {
        if (sig != SIGCHLD) on_signal(sig);
      }
    }
  }
  // Cheap (one WNOHANG wait per live rank), and needs no trust in SIGCHLD bookkeeping.
  reap();
  on_deadlines();
}

void Supervisor::reap() {
  for (Rank& rank : ranks_) {
    if (!rank.running) continue;
    int status = 0;
    const pid_t pid = ::waitpid(rank.pid, &status, WNOHANG);
    if (pid == rank.pid) on_exit(rank, status);
  }
  if (!any_running() && any_output_open() && !drain_deadline_) {
    drain_deadline_ = Clock::now() + kDrainAfterExit;
  }
}

void Supervisor::on_exit(Rank& rank, int wait_status) {
  rank.running = false;
  for (Stream& s : rank.streams) {
    for (int i = 0; i < kMaxDrainReads && read_once(s); ++i) {
    }
  }
  if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0) return;
  if (exit_code_) return;  // only the first failure is reported and decides the exit code
  exit_code_ = shell_exit_code(wait_status);
  const bool stop_others = !stopping_ && any_running();
  say("rank " + std::to_string(rank.rank) + " (pid " + std::to_string(rank.pid) + ") " +
      describe(wait_status) + (stop_others ? "; stopping the other ranks" : ""));
  if (!stopping_) begin_stop(SIGTERM);
}

void Supervisor::on_signal(int sig) {
  if (!stopping_) {
    say("received " + signal_name(sig) + "; forwarding it to the ranks");
    begin_stop(sig);
  } else if (!killed_ && any_running()) {
    say("received " + signal_name(sig) + " while stopping; sending SIGKILL to the ranks");
    signal_groups(SIGKILL);
    killed_ = true;
  }
}

void Supervisor::begin_stop(int sig) {
  stopping_ = true;
  stop_signal_ = sig;
  kill_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(options_.kill_grace_s));
  signal_groups(sig);
  // A stopped rank (SIGSTOP, a debugger detached badly) only acts on SIGTERM once it runs
  // again; without SIGCONT it would cost the whole kill grace.
  signal_groups(SIGCONT);
}

void Supervisor::signal_groups(int sig) {
  // Also exited ranks: their children are still in the group and may hold resources (ports,
  // GPUs) or the output pipes. ESRCH (an empty group) is expected and ignored.
  for (const Rank& rank : ranks_) {
    if (rank.pid > 0) ::kill(-rank.pid, sig);
  }
}

bool Supervisor::read_once(Stream& stream) {
  if (!stream.open()) return false;
  char buffer[kReadChunk];
  const ssize_t n = ::read(stream.fd.get(), buffer, sizeof(buffer));
  if (n > 0) {
    stream.prefixer->feed(std::string_view(buffer, static_cast<std::size_t>(n)));
    return true;
  }
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return false;
  close_stream(stream);  // EOF, or an error that will not go away
  return false;
}

void Supervisor::close_stream(Stream& stream) {
  if (stream.prefixer) stream.prefixer->finish();
  stream.fd.reset();
}

void Supervisor::on_deadlines() {
  const auto now = Clock::now();
  if (stopping_ && !killed_ && any_running() && now >= kill_deadline_) {
    std::string which;
    for (const Rank& r : ranks_) {
      if (r.running) which += (which.empty() ? "" : ", ") + std::to_string(r.rank);
    }
    say("rank(s) " + which + " still running " + seconds_text(options_.kill_grace_s) + "s after " +
        signal_name(stop_signal_) + "; sending SIGKILL");
    signal_groups(SIGKILL);
    killed_ = true;
  }
  if (drain_deadline_ && now >= *drain_deadline_) {
    // Only children of the ranks can still hold the pipes; on a failed run they go too.
    if (stopping_) signal_groups(SIGKILL);
    for (Rank& r : ranks_) {
      for (Stream& s : r.streams) close_stream(s);
    }
  }
}

int Supervisor::poll_timeout_ms() const {
  std::optional<Clock::time_point> wake;
  if (stopping_ && !killed_ && any_running()) wake = kill_deadline_;
  if (drain_deadline_ && (!wake || *drain_deadline_ < *wake)) wake = drain_deadline_;
  if (!wake) return -1;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(*wake - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

}  // namespace

int launch(const Options& options, int master_port) {
  // A closed stdout (e.g. `pgrun ... | head`) must not kill the supervisor.
  ::signal(SIGPIPE, SIG_IGN);
  Supervisor supervisor(options, master_port);
  try {
    return supervisor.run();
  } catch (...) {
    supervisor.kill_all();
    throw;
  }
}

}  // namespace procgroup::pgrun
