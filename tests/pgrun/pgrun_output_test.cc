// How pgrun copies the ranks' stdout and stderr: whole prefixed lines, never torn between ranks.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "subprocess.h"

extern char** environ;

namespace procgroup::testing {
namespace {

// pgrun with its stdout on a pipe that the test reads while the ranks still run.
class PipedPgrun {
 public:
  explicit PipedPgrun(const std::vector<std::string>& argv) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) {
      ADD_FAILURE() << "pipe2 failed";
      return;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    out_fd_ = out[0];
    EXPECT_GT(pid_, 0) << "cannot start " << argv[0];
  }
  ~PipedPgrun() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(out_fd_);
  }
  PipedPgrun(const PipedPgrun&) = delete;
  PipedPgrun& operator=(const PipedPgrun&) = delete;

  // Reads until `text` has arrived (true), EOF or timeout_s (false).
  bool read_until(const std::string& text, double timeout_s) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (out_.find(text) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd pfd{out_fd_, POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
      char buffer[4096];
      const ssize_t n = ::read(out_fd_, buffer, sizeof(buffer));
      if (n <= 0) return false;
      out_.append(buffer, static_cast<std::size_t>(n));
    }
    return true;
  }
  // Reads to EOF and reaps pgrun (SIGKILL after timeout_s); its exit code, -1 if it did not exit.
  int wait(double timeout_s) {
    read_until(std::string(1, '\0'), timeout_s);  // a byte the ranks never write: read to EOF
    int status = 0;
    const pid_t pid = std::exchange(pid_, -1);
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > end) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  const std::string& out() const { return out_; }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string out_;
};

TEST(PgrunOutput, PrefixesEveryLineAndNeverInterleavesRanksMidLine) {
  constexpr int kRanks = 4;
  constexpr int kLines = 500;
  // The probe writes each line in three write() calls; unbuffered copying would tear them.
  const ProcessResult r =
      run({PGRUN_PATH, "--nproc-per-node", std::to_string(kRanks), PGRUN_PROBE_PATH, "lines",
           std::to_string(kLines), "err", "to-stderr"},
          45);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  const std::regex line_re(R"(^\[rank (\d)\] rank=(\d) line=(\d+) ([a-z]+) end$)");
  std::map<int, int> next_line;
  std::istringstream lines(r.out);
  std::string line;
  int total = 0;
  while (std::getline(lines, line)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, line_re)) << "torn or unprefixed line: " << line;
    const int rank = std::stoi(m[1]);
    ASSERT_EQ(std::stoi(m[2]), rank) << line;
    ASSERT_EQ(std::stoi(m[3]), next_line[rank]) << "lines of rank " << rank << " out of order";
    ASSERT_EQ(m[4].str(), std::string(150, static_cast<char>('a' + rank))) << line;
    ++next_line[rank];
    ++total;
  }
  EXPECT_EQ(total, kRanks * kLines);
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_EQ(next_line[rank], kLines) << "rank " << rank;
    // stderr lines go to pgrun's stderr, prefixed the same way.
    EXPECT_NE(r.err.find("[rank " + std::to_string(rank) + "] to-stderr\n"), std::string::npos)
        << r.err;
  }
  EXPECT_EQ(r.out.find("to-stderr"), std::string::npos);
}

TEST(PgrunOutput, EndsAPartialLastLineWithANewline) {
  const ProcessResult r = run({PGRUN_PATH, "--tee-prefix", "--nproc-per-node", "2",
                               PGRUN_PROBE_PATH, "out", "first", "partial", "no-newline"},
                              30);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* rank : {"0", "1"}) {
    const std::string prefix = std::string("[rank ") + rank + "] ";
    EXPECT_NE(r.out.find(prefix + "first\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(prefix + "no-newline\n"), std::string::npos) << r.out;
  }
  EXPECT_EQ(r.out.size(), 2 * (std::string("[rank 0] first\n").size() +
                               std::string("[rank 0] no-newline\n").size()))
      << r.out;
}

TEST(PgrunOutput, NoPrefixPassesOutputThroughUntouched) {
  const ProcessResult r = run({PGRUN_PATH, "--no-prefix", "--nproc-per-node", "1", PGRUN_PROBE_PATH,
                               "out", "hello", "err", "oops", "partial", "tail"},
                              30);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello\ntail");
  EXPECT_EQ(r.err, "oops\n");
}

TEST(PgrunOutput, ArgumentsAfterProgramBelongToIt) {
  // "--help" and "--nproc-per-node" after PROGRAM are the probe's text, not pgrun options.
  const ProcessResult r = run({PGRUN_PATH, "--nproc-per-node", "1", "--", PGRUN_PROBE_PATH, "out",
                               "--help", "out", "--nproc-per-node"},
                              30);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[rank 0] --help\n[rank 0] --nproc-per-node\n");
  const ProcessResult plain =
      run({PGRUN_PATH, "--nproc-per-node", "1", PGRUN_PROBE_PATH, "out", "--help"}, 30);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out, "[rank 0] --help\n");
}

TEST(PgrunOutput, ProgressBarRedrawsArriveWhileTheRankRuns) {
  // Rank 0 draws a bar "\r\033[K..." with no newline, then waits for the test: each redraw
  // must come through the pipe at once, prefixed, not only when the rank exits.
  TempDir dir;
  const std::string go = (dir.path() / "go").string();
  PipedPgrun pgrun({PGRUN_PATH, "--nproc-per-node", "2", PGRUN_PROBE_PATH, "bar", "step 1 of 2",
                    "wait-file", go, "bar", "step 2 of 2", "wait-file", go + "2", "out", ""});
  EXPECT_TRUE(pgrun.read_until("[rank 0] \033[Kstep 1 of 2\r", 10)) << pgrun.out();
  std::ofstream(go).put('\n');
  EXPECT_TRUE(pgrun.read_until("[rank 0] \033[Kstep 2 of 2\r", 10)) << pgrun.out();
  std::ofstream(go + "2").put('\n');
  EXPECT_EQ(pgrun.wait(20), 0) << pgrun.out();
  // Rank 0's last bar again, ended by the rank's own newline; rank 1's too (its bar and newline
  // may arrive in one read, so no shown-at-once '\r' is expected there).
  EXPECT_NE(pgrun.out().find("[rank 0] \033[Kstep 2 of 2\n"), std::string::npos) << pgrun.out();
  EXPECT_NE(pgrun.out().find("[rank 1] \033[Kstep 2 of 2\n"), std::string::npos) << pgrun.out();
}

}  // namespace
}  // namespace procgroup::testing
