// fashion_mnist --device cuda. Without a device (label unit): make_ops and the program fail
// at once, saying "no CUDA device" and CUDA's own reason (or that it was built without
// CUDA). With a device (label gpu, skipped elsewhere), on a group of one on nccl, which
// takes CUDA buffers only: the CUDA MLP's forward, gradients, running statistics and SGD
// step against the CPU's on one batch and a short training run against the same run on the
// CPU (per-rank and synchronised batch norm), resuming from a checkpoint, the overhead
// measurement, and the reductions of host values.
//
// Expected agreement: the matrix products sum in a different order (cuBLAS vs OpenBLAS) and
// everything else rounds as on the CPU, so one step agrees to ~1e-5 relative; after a short
// run the parameters agree to 1e-3 relative, the loss to 1e-3 and the accuracy to 2 samples.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "../bench/cuda_probe.h"
#include "ops.h"
#include "overhead.h"
#include "train_test_util.h"
#include "trainer.h"

namespace fashion_mnist {
namespace {

using procgroup::testing::CudaProbe;
using procgroup::testing::probe_cuda;

#ifndef TRAIN_GPU_TESTS
TEST(TrainDevice, CudaWithoutADeviceSaysSo) {
  const CudaProbe cuda = probe_cuda();
  if (cuda.devices > 0) GTEST_SKIP() << "a CUDA device is present: train_gpu_test covers it";
  const std::string want = cuda.built ? "--device cuda: no CUDA device: " + cuda.reason
                                      : "--device cuda: this fashion_mnist was built without CUDA";
  try {
    make_ops("cuda", 0, 1);
    ADD_FAILURE() << "make_ops(\"cuda\") succeeded without a device";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
  // The program, launched as users launch it: exit 1 with that message, before any data.
  const procgroup::testing::ProcessResult r = procgroup::testing::run(
      {FASHION_MNIST_PATH, "--device", "cuda", "--data", "/nonexistent"}, 30, {"RANK="});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("fashion_mnist: error: " + want), std::string::npos) << r.err;
}

TEST(TrainDevice, UnknownDeviceIsAUsageError) {
  const procgroup::testing::ProcessResult r =
      procgroup::testing::run({FASHION_MNIST_PATH, "--device", "tpu"}, 30, {"RANK="});
  EXPECT_NE(r.exit_code, 0) << r.err;  // CLI11's validation status, as for other options
  EXPECT_NE(r.err.find("--device: tpu not in {cpu,cuda}"), std::string::npos) << r.err;
}
#else

class TrainGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    const CudaProbe cuda = probe_cuda();
    if (cuda.devices == 0) GTEST_SKIP() << "no CUDA device: " << cuda.reason;
    cuda_ = make_ops("cuda", 0, 1);
  }
  std::unique_ptr<Ops> cuda_;
};

// body on a group of one on the nccl backend, which (like every --device cuda run) refuses
// host buffers: anything the CUDA path sends from host memory fails the test.
void on_nccl(const std::function<void(procgroup::Group&)>& body) {
  procgroup::testing::TempDir dir;
  const std::string url = "file://" + dir.str();
  pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
  o.rank = 0;
  o.size = 1;
  o.backend = "nccl";
  o.device_type = PG_DEVICE_CUDA;
  o.store_url = url.c_str();
  o.timeout_ms = 60000;
  procgroup::Group group(o);
  body(group);
  group.destroy();
}

std::vector<float> host(const Ops& ops, std::span<const float> device) {
  std::vector<float> v(device.size());
  ops.to_host(v.data(), device.data(), v.size() * sizeof(float));
  return v;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rel,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t j = 0; j < want.size(); ++j) {
    EXPECT_NEAR(got[j], want[j], 1e-6 + rel * std::abs(want[j])) << what << "[" << j << "]";
  }
}

TrainConfig short_run(bool sync_bn) {
  TrainConfig c;
  c.hidden = {128, 64};
  c.epochs = 2;
  c.batch_size = 64;
  c.lr = 0.05f;
  c.progress = ProgressMode::kNone;
  c.seed = 4;
  c.sync_bn = sync_bn;
  return c;
}

// The reductions of host values (the trainer's loss and accuracy sums) on nccl.
TEST_F(TrainGpu, AllreduceValuesGoThroughTheDevice) {
  on_nccl([&](procgroup::Group& group) {
    std::vector<double> v = {1.5, -2.0, 3.0};
    allreduce_values(group, *cuda_, v);
    EXPECT_EQ(v, (std::vector<double>{1.5, -2.0, 3.0}));
    allreduce_values(group, *cuda_, v, procgroup::ReduceOp::kMax);
    EXPECT_EQ(v, (std::vector<double>{1.5, -2.0, 3.0}));
  });
}

// One batch of 64 through 784-128-BN-64-BN-10: logits, every gradient, the running
// statistics, then one SGD step, on both devices; per-rank and synchronised batch norm (the
// CPU's over loopback, the GPU's ddp::SyncBatchNorm on device memory over nccl).
TEST_F(TrainGpu, OneBatchMatchesTheCpu) {
  const FashionMnist data = testing::synthetic_data(64, 1, 784, 5);
  for (bool sync : {false, true}) {
    testing::run_ranks(1, [&](procgroup::Group& cpu_group, int) {
      on_nccl([&](procgroup::Group& gpu_group) {
        const MlpShape shape{784, {128, 64}, kClasses};
        Mlp cpu(shape, 3,
                [&](int c) { return cpu_ops().make_batch_norm(c, sync ? &cpu_group : nullptr); });
        Mlp gpu(
            shape, 3, [&](int c) { return cuda_->make_batch_norm(c, sync ? &gpu_group : nullptr); },
            *cuda_);
        std::vector<float> x(64 * 784);
        for (int i = 0; i < 64; ++i) data.train.normalized(i, x.data() + i * 784);
        DeviceArray x_gpu(*cuda_, x.size()), d_gpu(*cuda_, 64 * kClasses);
        DeviceBuffer<uint8_t> y_gpu(*cuda_, 64);
        cuda_->to_device(x_gpu.data(), x.data(), x.size() * sizeof(float));
        cuda_->to_device(y_gpu.data(), data.train.labels.data(), 64);
        std::vector<float> d_cpu(64 * kClasses);

        auto logits_cpu = cpu.forward(x.data(), 64);
        auto logits_gpu = gpu.forward(x_gpu.data(), 64);
        expect_close(host(*cuda_, logits_gpu), {logits_cpu.begin(), logits_cpu.end()}, 1e-4,
                     "logits");
        const LossStats lc = cpu_ops().softmax_cross_entropy(
            logits_cpu.data(), data.train.labels.data(), 64, kClasses, 1.0f / 64, d_cpu.data());
        const LossStats lg = cuda_->softmax_cross_entropy(logits_gpu.data(), y_gpu.data(), 64,
                                                          kClasses, 1.0f / 64, d_gpu.data());
        EXPECT_NEAR(lg.loss_sum, lc.loss_sum, 1e-4 * lc.loss_sum);
        EXPECT_EQ(lg.correct, lc.correct);
        // Twice: gradients accumulate on both devices (SyncBatchNorm's too).
        for (int pass = 0; pass < 2; ++pass) {
          cpu.backward(d_cpu, [](size_t) {});
          gpu.backward(d_gpu.span(), [](size_t) {});
        }
        for (size_t i = 0; i < cpu.num_parameters(); ++i) {
          expect_close(host(*cuda_, gpu.grad(i)), {cpu.grad(i).begin(), cpu.grad(i).end()}, 1e-3,
                       cpu.name(i) + (sync ? " (sync bn)" : ""));
        }
        auto bc = cpu.buffers(), bg = gpu.buffers();
        for (size_t k = 0; k < bc.size(); ++k) {
          EXPECT_EQ(bg[k].tensor.device.type, PG_DEVICE_CUDA) << bc[k].name;
          const auto* p = static_cast<const float*>(bc[k].tensor.data);
          expect_close(
              host(*cuda_, {static_cast<const float*>(bg[k].tensor.data), bg[k].tensor.numel}),
              {p, p + bc[k].tensor.numel}, 1e-4, bc[k].name);
        }
        Sgd sc(cpu, {}), sg(gpu, {});
        sc.step(cpu, 0.1f);
        sg.step(gpu, 0.1f);
        for (size_t i = 0; i < cpu.num_parameters(); ++i) {
          expect_close(host(*cuda_, gpu.value(i)), {cpu.value(i).begin(), cpu.value(i).end()}, 1e-4,
                       cpu.name(i) + " after a step");
        }
      });
    });
  }
}

// One rank on nccl (CUDA) against one rank on loopback (CPU): same seed, same data, with
// per-rank and with synchronised batch norm.
TEST_F(TrainGpu, ShortRunMatchesTheCpuRun) {
  const FashionMnist data = testing::synthetic_data(768, 200, 784, 9);
  for (bool sync_bn : {false, true}) {
    const TrainConfig c = short_run(sync_bn);
    std::vector<EpochRecord> cpu_epochs, gpu_epochs;
    std::vector<procgroup::ddp::CheckpointEntry> cpu_state, gpu_state;
    testing::run_ranks(1, [&](procgroup::Group& group, int) {
      Trainer t(group, c, data);
      cpu_epochs = t.run();
      cpu_state = testing::snapshot(t);
    });
    on_nccl([&](procgroup::Group& group) {
      Trainer t(group, c, data, *cuda_);
      gpu_epochs = t.run();
      gpu_state = testing::snapshot(t);
    });
    const std::string what = sync_bn ? "sync bn" : "per-rank bn";
    ASSERT_EQ(gpu_epochs.size(), 2u) << what;
    for (size_t e = 0; e < 2; ++e) {
      EXPECT_NEAR(gpu_epochs[e].train_loss, cpu_epochs[e].train_loss,
                  1e-3 * cpu_epochs[e].train_loss)
          << what << ", epoch " << e + 1;
      EXPECT_NEAR(gpu_epochs[e].test_acc, cpu_epochs[e].test_acc, 2.0 / 200) << what << e;
    }
    EXPECT_GT(gpu_epochs.back().test_acc, 0.5) << "the synthetic task must be learnt on the GPU";
    EXPECT_LT(testing::max_relative_difference(gpu_state, cpu_state), 1e-3) << what;
  }
}

// Checkpoints of device tensors over nccl: a run stopped after epoch 1 and resumed ends with
// the bytes of a run never stopped; --final-state holds the same bytes.
TEST_F(TrainGpu, ResumingOnNcclEndsWithIdenticalState) {
  const FashionMnist data = testing::synthetic_data(384, 100, 784, 11);
  for (bool sync_bn : {false, true}) {
    procgroup::testing::TempDir dir;
    TrainConfig c = short_run(sync_bn);
    c.epochs = 3;
    c.schedule = Schedule::kConstant;  // as in trainer_test.cc's CPU version
    std::vector<procgroup::ddp::CheckpointEntry> straight, resumed;
    on_nccl([&](procgroup::Group& group) {
      Trainer t(group, c, data, *cuda_);
      t.run();
      straight = testing::snapshot(t);
    });
    c.checkpoint = dir.path() / "run.ckpt";
    c.final_state = dir.path() / "run.final";
    c.epochs = 1;
    on_nccl([&](procgroup::Group& group) { Trainer(group, c, data, *cuda_).run(); });
    c.epochs = 3;
    c.resume = true;
    on_nccl([&](procgroup::Group& group) {
      Trainer t(group, c, data, *cuda_);
      EXPECT_EQ(t.run().size(), 2u);
      EXPECT_TRUE(t.resumed());
      resumed = testing::snapshot(t);
    });
    const std::string what = sync_bn ? " (sync bn)" : " (per-rank bn)";
    const auto final_state = procgroup::ddp::read_checkpoint_file(c.final_state);
    ASSERT_EQ(resumed.size(), straight.size());
    ASSERT_EQ(final_state.size(), straight.size());
    for (size_t i = 0; i < straight.size(); ++i) {
      EXPECT_EQ(resumed[i].name, straight[i].name);
      EXPECT_EQ(resumed[i].data, straight[i].data) << straight[i].name << what;
      EXPECT_EQ(final_state[i].data, straight[i].data) << straight[i].name << what;
    }
  }
}

// --measure-overhead on nccl: its barriers, the raw allreduce and the per-step reductions.
TEST_F(TrainGpu, OverheadMeasurementRunsOnNccl) {
  const FashionMnist data = testing::synthetic_data(256, 10, 784, 13);
  on_nccl([&](procgroup::Group& group) {
    Trainer t(group, short_run(true), data, *cuda_);
    const OverheadResult r = measure_overhead(group, t, 4, 1);
    EXPECT_EQ(r.steps, 4);
    EXPECT_GT(r.ddp_ms, 0);
    EXPECT_GT(r.no_sync_ms, 0);
    EXPECT_GT(r.allreduce_ms, 0);
    size_t numel = 0;
    for (size_t i = 0; i < t.model().num_parameters(); ++i) numel += t.model().grad(i).size();
    EXPECT_EQ(r.gradient_bytes, numel * sizeof(float));
  });
}
#endif

}  // namespace
}  // namespace fashion_mnist
