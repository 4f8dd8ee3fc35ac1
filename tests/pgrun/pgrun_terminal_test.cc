// pgrun on a real terminal (a detached tmux pane): rank 0's progress bar, redrawn in place with
// "\r", is on screen while the rank runs, not only when it exits. Skips without tmux.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "subprocess.h"

namespace procgroup::testing {
namespace {

std::string find_in_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const auto candidate = std::filesystem::path(dir) / program;
    if (!dir.empty() && std::filesystem::exists(candidate)) return candidate.string();
  }
  return "";
}

// One private tmux server (its socket in a TempDir, so tests run in parallel), killed at the end.
class TmuxServer {
 public:
  TmuxServer(std::string tmux, std::filesystem::path socket)
      : tmux_(std::move(tmux)), socket_(std::move(socket)) {}
  ~TmuxServer() { command({"kill-server"}); }
  TmuxServer(const TmuxServer&) = delete;
  TmuxServer& operator=(const TmuxServer&) = delete;

  ProcessResult command(const std::vector<std::string>& args) const {
    // Not the tmux the tests may run in, and no user configuration.
    std::vector<std::string> argv = {"/usr/bin/env",   "-u", "TMUX",     tmux_, "-S",
                                     socket_.string(), "-f", "/dev/null"};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, 10);
  }

 private:
  std::string tmux_;
  std::filesystem::path socket_;
};

std::string quoted(const std::string& text) { return "'" + text + "'"; }

TEST(PgrunTerminal, RankZerosProgressBarIsOnScreenWhileItRuns) {
  const std::string tmux = find_in_path("tmux");
  if (tmux.empty()) GTEST_SKIP() << "tmux is not installed (Debian package tmux)";
  TempDir dir;
  const std::string go = (dir.path() / "go").string();
  TmuxServer server(tmux, dir.path() / "tmux.sock");
  // Rank 1 exits at once; rank 0 draws its bar and waits. The sleep keeps the pane readable.
  const std::string job = quoted(PGRUN_PATH) + " --nproc-per-node 2 " + quoted(PGRUN_PROBE_PATH) +
                          " exit-if 1 0 bar 'step 1 of 2' wait-file " + quoted(go) + "; sleep 30";
  const ProcessResult started = server.command({"new-session", "-d", "-x", "100", "-y", "10", job});
  ASSERT_EQ(started.exit_code, 0) << started.err;

  std::string screen;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (screen.find("[rank 0] step 1 of 2") == std::string::npos &&
         std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    screen = server.command({"capture-pane", "-p"}).out;
  }
  std::ofstream(go).put('\n');  // lets rank 0 finish either way
  EXPECT_NE(screen.find("[rank 0] step 1 of 2"), std::string::npos)
      << "the bar did not reach the terminal while rank 0 ran; screen:\n"
      << screen;
}

}  // namespace
}  // namespace procgroup::testing
