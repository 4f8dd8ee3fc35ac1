// pgrun's supervision: exit codes, stopping the other ranks when one fails, the SIGKILL grace
// period, and forwarding signals sent to pgrun. Sleeping ranks sleep 30 s, so a run that ends
// in a few seconds proves pgrun stopped them rather than waited for them.
#include <gtest/gtest.h>
#include <signal.h>

#include <string>
#include <thread>

#include "subprocess.h"

namespace procgroup::testing {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(PgrunSupervision, AllRanksSucceedingExitsZeroQuietly) {
  const ProcessResult r =
      run({PGRUN_PATH, "--nproc-per-node", "4", PGRUN_PROBE_PATH, "out", "ok"}, 30);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.err, "");
}

TEST(PgrunSupervision, FailingRankCodeIsReturnedAndSleepingRanksStopAtOnce) {
  // A long grace period: finishing fast means SIGTERM stopped the sleepers, not SIGKILL.
  const ProcessResult r = run({PGRUN_PATH, "--kill-grace", "20", "--nproc-per-node", "3",
                               PGRUN_PROBE_PATH, "exit-if", "1", "3", "sleep", "30"},
                              45);
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_LT(r.seconds, 10.0);
  EXPECT_TRUE(contains(r.err, "pgrun: rank 1 (pid ")) << r.err;
  EXPECT_TRUE(contains(r.err, "exited with code 3; stopping the other ranks")) << r.err;
}

TEST(PgrunSupervision, FirstFailureDecidesTheExitCode) {
  // Rank 0 fails with 3 once everyone is ready; the others then fail with 4 on SIGTERM.
  TempDir dir;
  const ProcessResult r =
      run({PGRUN_PATH, "--nproc-per-node", "3", PGRUN_PROBE_PATH, "catch", dir.str(), "4", "ready",
           dir.str(), "wait-ready", dir.str(), "3", "exit-if", "0", "3", "sleep", "30"},
          45);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_LT(r.seconds, 10.0);
  EXPECT_EQ(read_file(dir.path() / "signal.1"), "15");
  EXPECT_EQ(read_file(dir.path() / "signal.2"), "15");
}

TEST(PgrunSupervision, StoppedRankIsContinuedSoItActsOnSigtermAtOnce) {
  // Rank 2 SIGSTOPs itself; a second later rank 1 fails. A stopped process acts on SIGTERM
  // only once continued: without pgrun's SIGCONT it would sit out the 20 s grace and die of
  // SIGKILL instead of catching SIGTERM.
  TempDir dir;
  const ProcessResult r =
      run({PGRUN_PATH, "--kill-grace", "20", "--nproc-per-node", "3", PGRUN_PROBE_PATH, "catch",
           dir.str(), "4", "ready", dir.str(), "wait-ready", dir.str(), "3", "kill-if", "2",
           std::to_string(SIGSTOP), "sleep", "1", "exit-if", "1", "3", "sleep", "30"},
          45);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_LT(r.seconds, 10.0);
  EXPECT_EQ(read_file(dir.path() / "signal.2"), "15");
}

TEST(PgrunSupervision, RankKilledBySignalGives128PlusSignal) {
  const ProcessResult r = run(
      {PGRUN_PATH, "--nproc-per-node", "2", PGRUN_PROBE_PATH, "kill-if", "1", "9", "sleep", "30"},
      45);
  EXPECT_EQ(r.exit_code, 137) << r.err;
  EXPECT_LT(r.seconds, 10.0);
  EXPECT_TRUE(contains(r.err, "rank 1 (pid ")) << r.err;
  EXPECT_TRUE(contains(r.err, "killed by signal 9 (SIGKILL)")) << r.err;
}

TEST(PgrunSupervision, RankIgnoringSigtermIsKilledAfterTheGracePeriod) {
  TempDir dir;
  const ProcessResult r = run(
      {PGRUN_PATH, "--kill-grace", "1", "--nproc-per-node", "2", PGRUN_PROBE_PATH, "ignore-term",
       "ready", dir.str(), "wait-ready", dir.str(), "2", "exit-if", "0", "5", "sleep", "30"},
      45);
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_GE(r.seconds, 1.0) << "SIGKILL came before the grace period ended";
  EXPECT_LT(r.seconds, 15.0);
  EXPECT_TRUE(contains(r.err, "rank(s) 1 still running 1s after SIGTERM; sending SIGKILL"))
      << r.err;
}

TEST(PgrunSupervision, StopsTheRanksChildrenToo) {
  // Each rank forks a sleeping child that holds the rank's output pipes; after the failure
  // both children must die with their ranks' process groups, and pgrun must not wait 60 s.
  TempDir dir;
  const ProcessResult r =
      run({PGRUN_PATH, "--nproc-per-node", "2", PGRUN_PROBE_PATH, "grandchild", dir.str(), "ready",
           dir.str(), "wait-ready", dir.str(), "2", "exit-if", "0", "3", "sleep", "30"},
          45);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_LT(r.seconds, 10.0);
  for (const char* rank : {"0", "1"}) {
    const std::string pid_text = read_file(dir.path() / (std::string("grandchild.") + rank));
    ASSERT_FALSE(pid_text.empty());
    const pid_t pid = std::stoi(pid_text);
    for (int i = 0; i < 200 && !process_is_dead(pid); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(process_is_dead(pid)) << "child of rank " << rank << " survived";
  }
}

TEST(PgrunSupervision, ForwardsSigtermAndReturnsTheRanksCodes) {
  TempDir dir;
  Subprocess pgrun({PGRUN_PATH, "--nproc-per-node", "2", PGRUN_PROBE_PATH, "catch", dir.str(), "7",
                    "ready", dir.str(), "sleep", "30"});
  ASSERT_TRUE(wait_for_files({dir.path() / "ready.0", dir.path() / "ready.1"}, 30));
  ASSERT_EQ(::kill(pgrun.pid(), SIGTERM), 0);
  const ProcessResult r = pgrun.wait(30);
  EXPECT_EQ(r.exit_code, 7) << r.err;
  EXPECT_LT(r.seconds, 15.0);
  EXPECT_EQ(read_file(dir.path() / "signal.0"), "15");
  EXPECT_EQ(read_file(dir.path() / "signal.1"), "15");
  EXPECT_TRUE(contains(r.out, "[rank 0] caught signal 15\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "[rank 1] caught signal 15\n")) << r.out;
  EXPECT_TRUE(contains(r.err, "received SIGTERM; forwarding it to the ranks")) << r.err;
}

TEST(PgrunSupervision, RanksDyingOfAForwardedSignalGive128PlusSignal) {
  TempDir dir;
  Subprocess pgrun(
      {PGRUN_PATH, "--nproc-per-node", "2", PGRUN_PROBE_PATH, "ready", dir.str(), "sleep", "30"});
  ASSERT_TRUE(wait_for_files({dir.path() / "ready.0", dir.path() / "ready.1"}, 30));
  ASSERT_EQ(::kill(pgrun.pid(), SIGINT), 0);
  const ProcessResult r = pgrun.wait(30);
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_LT(r.seconds, 15.0);
}

TEST(PgrunSupervision, RanksDieWithAKilledPgrun) {
  // SIGKILL leaves pgrun no chance to stop the ranks: they must not run on as orphans.
  TempDir dir;
  Subprocess pgrun(
      {PGRUN_PATH, "--nproc-per-node", "2", PGRUN_PROBE_PATH, "ready", dir.str(), "sleep", "30"});
  ASSERT_TRUE(wait_for_files({dir.path() / "ready.0", dir.path() / "ready.1"}, 30));
  ASSERT_EQ(::kill(pgrun.pid(), SIGKILL), 0);
  const ProcessResult r = pgrun.wait(30);
  EXPECT_EQ(r.term_signal, SIGKILL);
  for (const char* rank : {"0", "1"}) {
    const pid_t pid = std::stoi(read_file(dir.path() / (std::string("ready.") + rank)));
    for (int i = 0; i < 500 && !process_is_dead(pid); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(process_is_dead(pid)) << "rank " << rank << " outlived pgrun";
    if (!process_is_dead(pid)) ::kill(pid, SIGKILL);
  }
}

}  // namespace
}  // namespace procgroup::testing
