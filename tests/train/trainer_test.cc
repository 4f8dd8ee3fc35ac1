// The Trainer with ranks as threads on the loopback backend, on synthetic data: the defining
// property of data parallelism on this model (N ranks x batch b == 1 rank x batch N*b, with
// SyncBatchNorm), what per-rank BatchNorm changes, exact evaluation sharding, deterministic
// seeding, and resuming from a checkpoint to the very same parameters.
#include "trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <mutex>

#include "train_test_util.h"

namespace fashion_mnist {
namespace {

using procgroup::ddp::CheckpointEntry;

struct Outcome {
  std::vector<EpochRecord> epochs;
  std::vector<CheckpointEntry> state;  // rank 0's, after training
  Evaluation eval;
  std::string error;
};

TrainConfig small_config(int batch, bool sync_bn) {
  TrainConfig c;
  c.hidden = {32, 16};
  c.epochs = 2;
  c.batch_size = batch;
  c.lr = 0.05f;
  c.sync_bn = sync_bn;
  c.progress = ProgressMode::kNone;
  c.seed = 7;
  c.eval_batch = 50;
  return c;
}

Outcome train(int ranks, const TrainConfig& config, const FashionMnist& data) {
  Outcome out;
  testing::run_ranks(ranks, [&](procgroup::Group& group, int rank) {
    Trainer trainer(group, config, data);
    auto epochs = trainer.run();
    Evaluation ev = trainer.evaluate();
    if (rank == 0) {
      out.epochs = epochs;
      out.state = testing::snapshot(trainer);
      out.eval = ev;
    }
  });
  return out;
}

const FashionMnist& data() {
  static const FashionMnist d = testing::synthetic_data(384, 63, 49, 3);
  return d;
}

TEST(Trainer, RanksTimesBatchEqualsOneRankWithTheGlobalBatchUnderSyncBn) {
  const Outcome one = train(1, small_config(48, true), data());
  ASSERT_EQ(one.epochs.size(), 2u);
  EXPECT_GT(one.epochs.back().test_acc, 0.5) << "the synthetic task must be learnable";
  for (int ranks : {2, 3}) {
    const Outcome many = train(ranks, small_config(48 / ranks, true), data());
    ASSERT_EQ(many.epochs.size(), 2u);
    for (size_t e = 0; e < 2; ++e) {
      EXPECT_NEAR(many.epochs[e].train_loss, one.epochs[e].train_loss,
                  1e-4 * one.epochs[e].train_loss)
          << ranks << " ranks, epoch " << e + 1;
      EXPECT_NEAR(many.epochs[e].test_acc, one.epochs[e].test_acc, 1.5 / 63) << ranks;
    }
    EXPECT_LT(testing::max_relative_difference(many.state, one.state), 1e-4) << ranks << " ranks";
  }
}

// Per-rank BatchNorm normalises each rank's 24 rows with their own statistics: a different
// (noisier) computation than 48 rows together, so the runs drift apart.
TEST(Trainer, PerRankBatchNormIsNotTheGlobalBatch) {
  const Outcome one = train(1, small_config(48, false), data());
  const Outcome two = train(2, small_config(24, false), data());
  EXPECT_GT(testing::max_relative_difference(two.state, one.state), 1e-3);
  EXPECT_GT(two.epochs.back().test_acc, 0.5);
}

TEST(Trainer, EvaluationCoversTheTestSetOnceWhateverTheRanks) {
  const Outcome one = train(1, small_config(48, true), data());
  const Outcome three = train(3, small_config(16, true), data());
  EXPECT_EQ(one.eval.count, 63);
  EXPECT_EQ(three.eval.count, 63);
  EXPECT_NEAR(three.eval.loss, one.eval.loss, 1e-3 * one.eval.loss);
}

TEST(Trainer, SameSeedSameRunOtherSeedOtherRun) {
  TrainConfig c = small_config(16, false);
  const Outcome a = train(2, c, data());
  const Outcome b = train(2, c, data());
  ASSERT_EQ(a.state.size(), b.state.size());
  for (size_t i = 0; i < a.state.size(); ++i) {
    EXPECT_EQ(a.state[i].data, b.state[i].data) << a.state[i].name;
  }
  EXPECT_EQ(a.epochs.back().train_loss, b.epochs.back().train_loss);
  c.seed = 8;
  const Outcome other = train(2, c, data());
  EXPECT_GT(testing::max_relative_difference(other.state, a.state), 1e-3);
}

// The loss and accuracy sums go through allreduce_values: host values reduced through a
// buffer on the Ops' device (host memory for the CPU; train_gpu_test runs it on CUDA).
TEST(Trainer, AllreduceValuesReducesHostValuesOverTheRanks) {
  testing::run_ranks(3, [](procgroup::Group& group, int rank) {
    const double r = rank;
    std::vector<double> sums = {1.5 * r, 1.0, -r};
    allreduce_values(group, cpu_ops(), sums);
    EXPECT_EQ(sums, (std::vector<double>{4.5, 3.0, -3.0})) << rank;
    std::vector<double> maxima = {r, 10 - r};
    allreduce_values(group, cpu_ops(), maxima, procgroup::ReduceOp::kMax);
    EXPECT_EQ(maxima, (std::vector<double>{2.0, 10.0})) << rank;
  });
}

TEST(Trainer, ResumingFromACheckpointEndsWithIdenticalParameters) {
  procgroup::testing::TempDir dir;
  TrainConfig c = small_config(16, false);
  c.epochs = 3;
  // Constant: with the cosine schedule a 1-epoch run would anneal to 0 within its epoch
  // (the real kill-and-resume, with the cosine schedule, is in process_test.cc).
  c.schedule = Schedule::kConstant;
  const Outcome straight = train(2, c, data());

  c.checkpoint = dir.path() / "run.ckpt";
  c.csv = dir.path() / "run.csv";
  c.epochs = 1;  // stop after the first epoch's checkpoint, like a run killed in epoch 2
  train(2, c, data());
  c.epochs = 3;
  c.resume = true;
  Outcome resumed;
  testing::run_ranks(2, [&](procgroup::Group& group, int rank) {
    Trainer trainer(group, c, data());
    auto epochs = trainer.run();
    EXPECT_TRUE(trainer.resumed());
    EXPECT_EQ(trainer.first_epoch(), 1);
    if (rank == 0) {
      resumed.epochs = epochs;
      resumed.state = testing::snapshot(trainer);
    }
  });
  ASSERT_EQ(resumed.epochs.size(), 2u);
  EXPECT_EQ(resumed.epochs[0].epoch, 2);
  ASSERT_EQ(resumed.state.size(), straight.state.size());
  for (size_t i = 0; i < straight.state.size(); ++i) {
    EXPECT_EQ(resumed.state[i].name, straight.state[i].name);
    EXPECT_EQ(resumed.state[i].data, straight.state[i].data) << straight.state[i].name;
  }
  EXPECT_EQ(resumed.epochs.back().train_loss, straight.epochs.back().train_loss);
  // The CSV holds each epoch once, in order.
  const std::string csv = procgroup::testing::read_file(c.csv);
  EXPECT_EQ(csv.rfind(csv_header() + "\n", 0), 0u) << csv;
  EXPECT_NE(csv.find("\n1,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\n2,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\n3,"), std::string::npos) << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 4) << csv;
}

// Rewrites one value of a checkpoint with a valid CRC, as a forger (or a buggy tool) would.
template <class T>
void forge(const std::filesystem::path& path, const std::string& name, size_t index, T value) {
  std::vector<CheckpointEntry> entries = procgroup::ddp::read_checkpoint_file(path);
  std::vector<procgroup::ddp::NamedTensor> tensors;
  for (CheckpointEntry& e : entries) {
    if (e.name == name) {
      ASSERT_EQ(e.data.size() / e.numel, sizeof(T)) << name;
      std::memcpy(e.data.data() + index * sizeof(T), &value, sizeof(T));
    }
    tensors.push_back({e.name, {e.data.data(), e.numel, e.dtype, {}}});
  }
  procgroup::ddp::write_checkpoint_file(path, tensors);
}

TEST(Trainer, ACheckpointWithAValidCrcButImpossibleValuesIsRefused) {
  procgroup::testing::TempDir dir;
  TrainConfig c = small_config(64, false);
  c.checkpoint = dir.path() / "run.ckpt";
  c.epochs = 1;
  train(1, c, data());
  const std::vector<char> good = [&] {
    std::ifstream in(c.checkpoint, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(in), {});
  }();
  c.epochs = 2;
  c.resume = true;
  const auto resume_error = [&] {
    std::string error = "(resumed)";
    testing::run_ranks(1, [&](procgroup::Group& group, int) {
      Trainer trainer(group, c, data());
      try {
        trainer.run();
      } catch (const std::exception& e) {
        error = e.what();
      }
    });
    std::ofstream(c.checkpoint, std::ios::binary).write(good.data(), std::ssize(good));
    return error;
  };
  const int64_t steps = 384 / 64;
  forge<int64_t>(c.checkpoint, "train.epochs_done", 0, -3);  // trained 4 epochs before
  EXPECT_NE(resume_error().find("train.epochs_done = -3 is not in 0..1000000"), std::string::npos);
  forge<int64_t>(c.checkpoint, "train.epochs_done", 0, int64_t{1} << 40);
  EXPECT_NE(resume_error().find("train.epochs_done = 1099511627776 is not"), std::string::npos);
  // The step the stall hook's old sentinel (-1) matched: it stalled, then failed on a path.
  forge<int64_t>(c.checkpoint, "train.steps_done", 0, -1);
  EXPECT_NE(resume_error().find("train.steps_done = -1, but 1 epochs of " + std::to_string(steps) +
                                " steps at global batch 64 make " + std::to_string(steps)),
            std::string::npos);
  forge<int64_t>(c.checkpoint, "train.global_batch", 0, 0);
  EXPECT_NE(resume_error().find("train.global_batch = 0 is not in 1.."), std::string::npos);
  forge<float>(c.checkpoint, "fc1.weight", 3, std::nanf(""));
  EXPECT_NE(resume_error().find("'fc1.weight' holds nan (not finite)"), std::string::npos);
  forge<float>(c.checkpoint, "bn1.running_var", 0, -1.0f);
  EXPECT_NE(resume_error().find("'bn1.running_var' holds -1.000000 (a variance must be"),
            std::string::npos);
  EXPECT_EQ(resume_error(), "(resumed)");  // the untouched file still resumes
  // Another global batch: its steps say nothing about this run's, which continues from the
  // epoch reached.
  forge<int64_t>(c.checkpoint, "train.global_batch", 0, 32);
  forge<int64_t>(c.checkpoint, "train.steps_done", 0, 999);
  testing::run_ranks(1, [&](procgroup::Group& group, int) {
    Trainer trainer(group, c, data());
    const std::vector<EpochRecord> epochs = trainer.run();
    ASSERT_EQ(epochs.size(), 1u);
    EXPECT_EQ(epochs[0].step, 2 * steps);
  });
}

}  // namespace
}  // namespace fashion_mnist
