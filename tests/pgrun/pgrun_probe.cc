// pgrun_probe: the rank program the pgrun tests launch. Its arguments are a script of actions
// run in order, so each test states exactly what every rank does:
//
//   env                print RANK, WORLD_SIZE, ... MASTER_PORT, PGRUN_TEST_INHERITED as KEY=VALUE
//   out TEXT | err TEXT  write TEXT and a newline to stdout | stderr
//   partial TEXT       write TEXT to stdout without a newline
//   bar TEXT           redraw a progress bar in place: "\r\033[K" and TEXT, no newline
//   lines N            write N numbered lines to stdout, each in three write() calls, so that
//                      a launcher passing bytes through unbuffered would interleave them
//   nofile             print "nofile=N", N the soft RLIMIT_NOFILE this rank got
//   cpus               print "cpus=LIST", this rank's Cpus_allowed_list from /proc/self/status
//   exit CODE          exit now
//   exit-if R CODE     exit now with CODE if this is rank R
//   kill-if R SIG      raise SIG if this is rank R
//   ignore-term        ignore SIGTERM
//   catch DIR CODE     on SIGTERM/SIGINT: write the signal number to DIR/signal.RANK, print
//                      "caught signal N", exit CODE
//   ready DIR          write this rank's pid to DIR/ready.RANK (tests wait for it before
//                      sending signals)
//   wait-ready DIR N   wait until DIR/ready.0 .. ready.N-1 all exist
//   wait-file PATH     wait until PATH exists (the test creates it)
//   grandchild DIR     fork a child that writes its pid to DIR/grandchild.RANK and sleeps 60 s
//   sleep SECONDS      sleep (a caught signal ends it, see catch)
//
// Every file is written under a temporary name and renamed, so readers never see it half done.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>

namespace {

volatile std::sig_atomic_t g_caught_signal = 0;  // set by the signal handler only
std::string g_catch_dir;
int g_catch_code = 0;

void on_signal(int sig) { g_caught_signal = sig; }

int rank() {
  const char* value = std::getenv("RANK");
  return value != nullptr ? std::atoi(value) : -1;
}

void write_fd(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n <= 0) return;
    text.remove_prefix(static_cast<std::size_t>(n));
  }
}

void write_file(const std::filesystem::path& path, const std::string& content) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  std::ofstream(tmp) << content;
  std::filesystem::rename(tmp, path);
}

std::filesystem::path rank_file(const std::string& dir, const char* name) {
  return std::filesystem::path(dir) / (std::string(name) + "." + std::to_string(rank()));
}

void check_caught() {
  if (g_caught_signal == 0) return;
  const int sig = g_caught_signal;
  write_file(rank_file(g_catch_dir, "signal"), std::to_string(sig));
  write_fd(STDOUT_FILENO, "caught signal " + std::to_string(sig) + "\n");
  std::exit(g_catch_code);
}

void sleep_for(double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    check_caught();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  check_caught();
}

void print_env() {
  for (const char* key : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                          "NODE_RANK", "MASTER_ADDR", "MASTER_PORT", "PGRUN_TEST_INHERITED"}) {
    const char* value = std::getenv(key);
    write_fd(STDOUT_FILENO, std::string(key) + "=" + (value != nullptr ? value : "<unset>") + "\n");
  }
}

void print_lines(int count) {
  // A long, checkable payload: the rank's letter repeated, so a torn line is visible.
  const std::string payload(150, static_cast<char>('a' + rank() % 26));
  for (int i = 0; i < count; ++i) {
    const std::string head = "rank=" + std::to_string(rank()) + " line=" + std::to_string(i);
    write_fd(STDOUT_FILENO, head);
    std::this_thread::yield();
    write_fd(STDOUT_FILENO, " " + payload);
    std::this_thread::yield();
    write_fd(STDOUT_FILENO, " end\n");
  }
}

void wait_file(const std::filesystem::path& path, std::chrono::steady_clock::time_point deadline) {
  while (!std::filesystem::exists(path)) {
    if (std::chrono::steady_clock::now() > deadline) {
      write_fd(STDERR_FILENO, "pgrun_probe: timed out waiting for " + path.string() + "\n");
      std::exit(99);
    }
    sleep_for(0.01);
  }
}

void wait_ready(const std::string& dir, int count) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int r = 0; r < count; ++r) {
    wait_file(std::filesystem::path(dir) / ("ready." + std::to_string(r)), end);
  }
}

void start_grandchild(const std::string& dir) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    write_file(rank_file(dir, "grandchild"), std::to_string(::getpid()));
    ::sleep(60);
    ::_exit(0);
  }
  // Wait for the file so "ready" after this action means the pid is known.
  while (!std::filesystem::exists(rank_file(dir, "grandchild"))) sleep_for(0.01);
}

[[noreturn]] void usage(const std::string& what) {
  write_fd(STDERR_FILENO, "pgrun_probe: bad script at '" + what + "'\n");
  std::exit(98);
}

}  // namespace

int main(int argc, char** argv) {
  auto arg = [&](int i) -> std::string {
    if (i >= argc) usage("<end>");
    return argv[i];
  };
  for (int i = 1; i < argc; ++i) {
    const std::string action = argv[i];
    if (action == "env") {
      print_env();
    } else if (action == "out") {
      write_fd(STDOUT_FILENO, arg(++i) + "\n");
    } else if (action == "err") {
      write_fd(STDERR_FILENO, arg(++i) + "\n");
    } else if (action == "partial") {
      write_fd(STDOUT_FILENO, arg(++i));
    } else if (action == "bar") {
      write_fd(STDOUT_FILENO, "\r\033[K" + arg(++i));
    } else if (action == "lines") {
      print_lines(std::stoi(arg(++i)));
    } else if (action == "nofile") {
      rlimit limit{};
      ::getrlimit(RLIMIT_NOFILE, &limit);
      write_fd(STDOUT_FILENO, "nofile=" + std::to_string(limit.rlim_cur) + "\n");
    } else if (action == "cpus") {
      std::ifstream status("/proc/self/status");
      std::string line;
      while (std::getline(status, line)) {
        if (line.starts_with("Cpus_allowed_list:")) {
          write_fd(STDOUT_FILENO, "cpus=" + line.substr(line.find_first_not_of(" \t", 18)) + "\n");
        }
      }
    } else if (action == "exit") {
      std::exit(std::stoi(arg(++i)));
    } else if (action == "exit-if") {
      const int r = std::stoi(arg(++i));
      const int code = std::stoi(arg(++i));
      if (r == rank()) std::exit(code);
    } else if (action == "kill-if") {
      const int r = std::stoi(arg(++i));
      const int sig = std::stoi(arg(++i));
      if (r == rank()) ::raise(sig);
    } else if (action == "ignore-term") {
      std::signal(SIGTERM, SIG_IGN);
    } else if (action == "catch") {
      g_catch_dir = arg(++i);
      g_catch_code = std::stoi(arg(++i));
      std::signal(SIGTERM, on_signal);
      std::signal(SIGINT, on_signal);
    } else if (action == "ready") {
      write_file(rank_file(arg(++i), "ready"), std::to_string(::getpid()));
    } else if (action == "wait-ready") {
      const std::string dir = arg(++i);
      wait_ready(dir, std::stoi(arg(++i)));
    } else if (action == "wait-file") {
      wait_file(arg(++i), std::chrono::steady_clock::now() + std::chrono::seconds(30));
    } else if (action == "grandchild") {
      start_grandchild(arg(++i));
    } else if (action == "sleep") {
      sleep_for(std::stod(arg(++i)));
    } else {
      usage(action);
    }
  }
  return 0;
}
