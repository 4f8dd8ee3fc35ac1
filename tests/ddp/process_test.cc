// ddp across real processes over gloo, launched with pgrun: the equivalence property, the
// mismatched-parameters error, and a training run killed with SIGKILL and resumed from its
// checkpoint ending with exactly the parameters of an uninterrupted run.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <string>

#include "procgroup/ddp/checkpoint.h"
#include "subprocess.h"

namespace procgroup::testing {
namespace {

const std::vector<std::string> kEnv = {"PROCGROUP_BACKEND=gloo", "PROCGROUP_TIMEOUT=30"};

#ifndef DDP_HAVE_GLOO
#define DDP_HAVE_GLOO 0
#endif

class DdpProcesses : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!DDP_HAVE_GLOO) GTEST_SKIP() << "the gloo backend is not built (PROCGROUP_WITH_GLOO)";
  }
};

ProcessResult pgrun(int ranks, std::vector<std::string> args, double timeout_s = 60) {
  std::vector<std::string> argv = {PGRUN_PATH, "--nproc-per-node", std::to_string(ranks),
                                   DDP_WORKER_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, timeout_s, kEnv);
}

TEST_F(DdpProcesses, EquivalenceOverGloo) {
  for (int ranks : {2, 3}) {
    for (const char* mode : {"copy", "view"}) {
      const ProcessResult r = pgrun(ranks, {"equivalence", mode});
      EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
      EXPECT_EQ(count(r.out, "equivalence ok"), ranks) << r.out << r.err;
    }
  }
}

TEST_F(DdpProcesses, MismatchedParametersAreAClearErrorOnEveryRank) {
  const ProcessResult r = pgrun(3, {"mismatch"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count(r.out,
                  "clear error: PG_ERR_MISMATCH: ddp: ranks registered different "
                  "parameter lists: rank 0 has 4 parameters, rank 1 has 4; first "
                  "difference at index 2: rank 0 has 'fc2.weight' f32 x 40, rank 1 "
                  "has 'fc2.kernel' f32 x 40"),
            3)
      << r.out << r.err;
  EXPECT_LT(r.seconds, 20) << "the error must come at once, not after a timeout";
}

std::vector<ddp::CheckpointEntry> final_state(const std::filesystem::path& p) {
  return ddp::read_checkpoint_file(p);
}

TEST_F(DdpProcesses, KilledRunResumesFromCheckpointToIdenticalParameters) {
  TempDir dir;
  const auto path = [&](const char* name) { return (dir.path() / name).string(); };
  const std::vector<std::string> common = {"train", "--steps", "14", "--every", "4"};
  auto args = [&](const std::string& tag, std::vector<std::string> extra = {}) {
    std::vector<std::string> a = common;
    for (const std::string& s : {std::string("--ckpt"), path((tag + ".ckpt").c_str()),
                                 std::string("--out"), path((tag + ".final").c_str())}) {
      a.push_back(s);
    }
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };

  const ProcessResult straight = pgrun(2, args("straight"));
  ASSERT_EQ(straight.exit_code, 0) << straight.out << straight.err;

  // Rank 0 stops after step 6 (last checkpoint at step 4) and is killed with SIGKILL.
  std::vector<std::string> argv = {PGRUN_PATH, "--nproc-per-node", "2", DDP_WORKER_PATH};
  for (const auto& a : args("killed", {"--stall-at", "6", "--marker", path("stalled")})) {
    argv.push_back(a);
  }
  Subprocess interrupted(argv, kEnv);
  ASSERT_TRUE(wait_for_files({path("stalled")}, 60));
  const pid_t victim = std::stoi(read_file(path("stalled")));
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  const ProcessResult killed = interrupted.wait(60);
  EXPECT_NE(killed.exit_code, 0) << killed.out << killed.err;
  EXPECT_FALSE(std::filesystem::exists(path("killed.final")));
  ASSERT_TRUE(std::filesystem::exists(path("killed.ckpt")));

  const ProcessResult resumed = pgrun(2, args("killed"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_EQ(count(resumed.out, "resumed at step 4"), 2) << resumed.out;

  const auto want = final_state(path("straight.final"));
  const auto got = final_state(path("killed.final"));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].name, want[i].name);
    EXPECT_EQ(got[i].data, want[i].data) << want[i].name << " differs";
  }
  EXPECT_EQ(count(straight.out, "resumed"), 0);
}

}  // namespace
}  // namespace procgroup::testing
