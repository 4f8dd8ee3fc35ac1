// The fashion_mnist program as users run it — real processes, real Fashion-MNIST (a subset),
// on every process backend built (gloo, and ucx when present): a short end-to-end run, the
// equivalence property across processes, a rank killed mid-epoch (the survivor fails with a
// clear error, no hang) and --resume continuing to the same parameters as an uninterrupted
// run, and the missing-data error.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "train_test_util.h"

namespace fashion_mnist {
namespace {

using procgroup::testing::count;
using procgroup::testing::free_port;
using procgroup::testing::ProcessResult;
using procgroup::testing::read_file;
using procgroup::testing::Subprocess;
using procgroup::testing::TempDir;

#ifndef TRAIN_HAVE_UCX
#define TRAIN_HAVE_UCX 0
#endif

constexpr int kTimeoutS = 10;  // PROCGROUP_TIMEOUT for every run

std::vector<std::string> backends() {
  std::vector<std::string> b = {"gloo"};
  if (TRAIN_HAVE_UCX) b.push_back("ucx");
  return b;
}

std::vector<std::string> env_for(const std::string& backend) {
  return {"PROCGROUP_BACKEND=" + backend, "PROCGROUP_TIMEOUT=" + std::to_string(kTimeoutS),
          "OPENBLAS_NUM_THREADS=1"};
}

// A subset of the real data and a smaller model keep each run to a second or two.
std::vector<std::string> small_run(std::vector<std::string> extra) {
  std::vector<std::string> a = {"--train-limit", "1536",   "--test-limit", "1000",
                                "--hidden",      "128,64", "--seed",       "3"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

ProcessResult pgrun(int ranks, const std::string& backend, const std::vector<std::string>& args,
                    double timeout_s = 120) {
  std::vector<std::string> argv = {PGRUN_PATH, "--nproc-per-node", std::to_string(ranks),
                                   FASHION_MNIST_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return procgroup::testing::run(argv, timeout_s, env_for(backend));
}

// Columns of the CSV's data rows (header skipped).
std::vector<std::vector<double>> csv_rows(const std::filesystem::path& p) {
  std::vector<std::vector<double>> rows;
  std::istringstream in(read_file(p));
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::vector<double> row;
    std::istringstream cells(line);
    std::string cell;
    while (std::getline(cells, cell, ',')) row.push_back(std::stod(cell));
    rows.push_back(row);
  }
  return rows;
}
enum Column { kEpoch, kStep, kTrainLoss, kTrainAcc, kTestLoss, kTestAcc };

class TrainProcesses : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainProcesses, OneEpochEndToEnd) {
  TempDir dir;
  const auto csv = dir.path() / "run.csv";
  const ProcessResult r =
      pgrun(2, GetParam(),
            small_run({"--epochs", "1", "--train-limit", "6000", "--hidden", "512,256", "--csv",
                       csv.string(), "--checkpoint", (dir.path() / "run.ckpt").string(),
                       "--progress", "lines", "--progress-interval", "0"}));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("[rank 0] fashion_mnist: 2 rank(s) on " + GetParam()), std::string::npos)
      << r.out;
  EXPECT_GT(count(r.out, "[rank 0] epoch 1/1 "), 1) << "progress lines: " << r.out;
  EXPECT_EQ(count(r.out, "[rank 1]"), 0) << "only rank 0 logs: " << r.out;
  EXPECT_NE(r.out.find("samples/s | ETA"), std::string::npos) << r.out;
  const auto rows = csv_rows(csv);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][kEpoch], 1);
  EXPECT_EQ(rows[0][kStep], 47);  // 3000 samples per rank / 64
  EXPECT_GT(rows[0][kTestAcc], 0.70) << "one epoch on 6000 samples learns most of the task";
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "run.ckpt"));
}

// 2 ranks x 32 against 1 rank x 64 with SyncBatchNorm: the same training, to float rounding.
TEST_P(TrainProcesses, TwoRanksMatchOneRankWithTheGlobalBatch) {
  TempDir dir;
  auto run = [&](int ranks, const std::string& batch, const std::string& tag) {
    const ProcessResult r =
        pgrun(ranks, GetParam(),
              small_run({"--epochs", "2", "--batch-size", batch, "--sync-bn", "--csv",
                         (dir.path() / (tag + ".csv")).string(), "--final-state",
                         (dir.path() / (tag + ".final")).string(), "--progress", "none"}));
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  };
  run(1, "64", "one");
  run(2, "32", "two");
  const auto one = csv_rows(dir.path() / "one.csv"), two = csv_rows(dir.path() / "two.csv");
  ASSERT_EQ(one.size(), 2u);
  ASSERT_EQ(two.size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_NEAR(two[e][kTrainLoss], one[e][kTrainLoss], 1e-4 * one[e][kTrainLoss]) << e;
    EXPECT_NEAR(two[e][kTestAcc], one[e][kTestAcc], 0.003) << e;
  }
  const auto a = procgroup::ddp::read_checkpoint_file(dir.path() / "one.final");
  const auto b = procgroup::ddp::read_checkpoint_file(dir.path() / "two.final");
  EXPECT_LT(testing::max_relative_difference(b, a), 1e-4);
}

// Rank 1 stops in the middle of epoch 2 and is killed with SIGKILL. Launched without pgrun
// (which would stop rank 0 itself), rank 0 must notice on its own and fail with a clear
// error within the timeout. --resume then continues from the epoch-1 checkpoint and ends
// with exactly the parameters of a run never interrupted.
TEST_P(TrainProcesses, KilledRankFailsTheOtherAndResumeContinues) {
  TempDir dir;
  const auto path = [&](const std::string& name) { return (dir.path() / name).string(); };
  const auto args = [&](const std::string& tag, std::vector<std::string> extra = {}) {
    std::vector<std::string> a = small_run({"--epochs", "3", "--checkpoint", path(tag + ".ckpt"),
                                            "--csv", path(tag + ".csv"), "--final-state",
                                            path(tag + ".final"), "--progress", "none"});
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const ProcessResult straight = pgrun(2, GetParam(), args("straight"));
  ASSERT_EQ(straight.exit_code, 0) << straight.out << straight.err;

  // 768 samples per rank / 64 = 12 steps per epoch: step 18 is in the middle of epoch 2.
  const std::string port = std::to_string(free_port());
  std::vector<std::unique_ptr<Subprocess>> ranks;
  for (int r = 0; r < 2; ++r) {
    std::vector<std::string> argv = {FASHION_MNIST_PATH};
    for (const auto& a : args("killed", {"--stall-at-step", "18", "--stall-rank", "1",
                                         "--stall-marker", path("stalled")})) {
      argv.push_back(a);
    }
    std::vector<std::string> env = env_for(GetParam());
    for (const std::string& v :
         {"RANK=" + std::to_string(r), std::string("WORLD_SIZE=2"),
          "LOCAL_RANK=" + std::to_string(r), std::string("LOCAL_WORLD_SIZE=2"),
          std::string("MASTER_ADDR=127.0.0.1"), "MASTER_PORT=" + port}) {
      env.push_back(v);
    }
    ranks.push_back(std::make_unique<Subprocess>(argv, env));
  }
  ASSERT_TRUE(procgroup::testing::wait_for_files({path("stalled")}, 60));
  ASSERT_EQ(::kill(ranks[1]->pid(), SIGKILL), 0);
  const auto killed_at = std::chrono::steady_clock::now();
  const ProcessResult survivor = ranks[0]->wait(3 * kTimeoutS);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  ranks[1]->wait(5);
  EXPECT_FALSE(survivor.timed_out) << "rank 0 hung after its peer died";
  EXPECT_EQ(survivor.exit_code, 1) << survivor.out << survivor.err;
  EXPECT_LT(waited, kTimeoutS + 5) << survivor.err;
  EXPECT_NE(survivor.err.find("fashion_mnist: rank 0: error: PG_ERR_"), std::string::npos)
      << survivor.out << survivor.err;
  EXPECT_FALSE(std::filesystem::exists(path("killed.final")));
  ASSERT_TRUE(std::filesystem::exists(path("killed.ckpt")));
  EXPECT_EQ(csv_rows(path("killed.csv")).size(), 1u) << "only epoch 1 completed";

  const ProcessResult resumed = pgrun(2, GetParam(), args("killed", {"--resume"}));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_NE(resumed.out.find("resumed from " + path("killed.ckpt") + " after epoch 1 (step 12)"),
            std::string::npos)
      << resumed.out;
  const auto want = procgroup::ddp::read_checkpoint_file(path("straight.final"));
  const auto got = procgroup::ddp::read_checkpoint_file(path("killed.final"));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].name, want[i].name);
    EXPECT_EQ(got[i].data, want[i].data) << want[i].name << " differs from the uninterrupted run";
  }
  const auto rows = csv_rows(path("killed.csv")), want_rows = csv_rows(path("straight.csv"));
  ASSERT_EQ(rows.size(), 3u);
  for (size_t e = 0; e < 3; ++e) {
    EXPECT_EQ(rows[e][kEpoch], e + 1);
    EXPECT_EQ(rows[e][kTrainLoss], want_rows[e][kTrainLoss]) << e;
    EXPECT_EQ(rows[e][kTestAcc], want_rows[e][kTestAcc]) << e;
  }
}

INSTANTIATE_TEST_SUITE_P(Train, TrainProcesses, ::testing::ValuesIn(backends()),
                         [](const auto& p) { return p.param; });

TEST(TrainProgram, MissingDataNamesTheDebianPackage) {
  TempDir dir;
  const ProcessResult r = procgroup::testing::run(
      {FASHION_MNIST_PATH, "--data", (dir.path() / "none").string()}, 30, {"RANK="});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("dataset-fashion-mnist"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--data DIR"), std::string::npos) << r.err;
}

TEST(TrainProgram, UsageErrors) {
  const ProcessResult r = procgroup::testing::run({FASHION_MNIST_PATH, "--resume"}, 30);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--resume needs --checkpoint PATH"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace fashion_mnist
