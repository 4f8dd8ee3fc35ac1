// Test helpers: run pgrun as a real child process with a wall-clock bound, capturing its
// stdout and stderr, and a self-deleting temporary directory for files the probe writes.
//
//   Subprocess pgrun({PGRUN_PATH, "--nproc-per-node", "2", PGRUN_PROBE_PATH, "env"});
//   ProcessResult result = pgrun.wait(20.0);
//   EXPECT_EQ(result.exit_code, 0) << result.err;
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace procgroup::testing {

struct ProcessResult {
  int exit_code = -1;   // -1 when it died of a signal or timed out
  int term_signal = 0;  // the signal it died of, if any
  bool timed_out = false;
  double seconds = 0;  // from start to exit
  std::string out;
  std::string err;
};

class Subprocess {
 public:
  // Starts argv[0] (a path) with the test's environment plus extra_env ("KEY=VALUE", replacing
  // entries of the same key) and /dev/null as stdin. Fails the test if it cannot start.
  explicit Subprocess(const std::vector<std::string>& argv,
                      const std::vector<std::string>& extra_env = {});
  ~Subprocess();  // SIGKILLs a child that is still running
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // Collects output until the child exits and its pipes close; SIGKILLs it after timeout_s.
  ProcessResult wait(double timeout_s);

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  double start_ = 0;
};

ProcessResult run(const std::vector<std::string>& argv, double timeout_s,
                  const std::vector<std::string>& extra_env = {});

// Waits up to timeout_s for every path to exist.
bool wait_for_files(const std::vector<std::filesystem::path>& paths, double timeout_s);

// True when pid is gone or a zombie (our container's init may not reap orphans promptly).
bool process_is_dead(pid_t pid);

std::string read_file(const std::filesystem::path& path);

// A TCP port on 127.0.0.1 that was free a moment ago (for a child to listen on).
int free_port();

// How many times what occurs in text.
int count(const std::string& text, const std::string& what);

// Runs fn in a forked child (call it while the test is single-threaded) with SIGALRM after
// timeout_s and, outside ASan and TSan (whose shadow memory a cap breaks), the address space
// capped extra_mib above the parent's: a test of hostile input stays bounded even when the
// code under test trusts the input. exit_code: fn's result, 125 for std::bad_alloc, 126 for
// another exception; -1 and term_signal when a signal (SIGALRM: timed out) ended it.
struct ChildResult {
  int exit_code = -1;
  int term_signal = 0;
  long peak_rss_mib = 0;  // the child's peak resident memory
};
ChildResult run_in_child(const std::function<int()>& fn, unsigned timeout_s, long extra_mib = 512);

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace procgroup::testing
