// The MLP's hand-written backward against central finite differences of the loss (every
// parameter element of a small model, BatchNorm in training mode), the order in which it
// reports gradients ready, accumulation, the SyncBatchNorm adapter, and the optimizer.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "layers.h"
#include "mlp.h"
#include "sgd.h"
#include "train_test_util.h"

namespace fashion_mnist {
namespace {

constexpr int kRows = 6;

struct Problem {
  std::vector<float> x;
  std::vector<uint8_t> labels;
};

Problem make_problem(const MlpShape& shape, uint64_t seed) {
  Problem p;
  for (int i = 0; i < kRows * shape.inputs; ++i) {
    p.x.push_back(static_cast<float>(testing::mix(seed + i) % 2001) / 1000.0f - 1.0f);
  }
  for (int i = 0; i < kRows; ++i) p.labels.push_back(testing::mix(seed * 31 + i) % shape.classes);
  return p;
}

double mean_loss(Mlp& model, const Problem& p) {
  auto logits = model.forward(p.x.data(), kRows);
  return softmax_cross_entropy(logits.data(), p.labels.data(), kRows, model.shape().classes, 1,
                               nullptr)
             .loss_sum /
         kRows;
}

// Analytic gradients of the mean loss; ready(i) recorded.
std::vector<size_t> backprop(Mlp& model, const Problem& p) {
  auto logits = model.forward(p.x.data(), kRows);
  std::vector<float> d(logits.size());
  softmax_cross_entropy(logits.data(), p.labels.data(), kRows, model.shape().classes, 1.0f / kRows,
                        d.data());
  std::vector<size_t> order;
  model.backward(d, [&](size_t i) { order.push_back(i); });
  return order;
}

BatchNormFactory local() {
  return [](int c) { return make_local_batch_norm(c); };
}

const MlpShape kShape{.inputs = 12, .hidden = {7, 5}, .classes = 4};

TEST(TrainMlp, GradientsMatchFiniteDifferences) {
  Mlp model(kShape, 5, local());
  const Problem p = make_problem(kShape, 11);
  // Non-trivial BatchNorm affine parameters, so their gradients are exercised too.
  for (size_t i = 0; i < model.num_parameters(); ++i) {
    if (model.name(i).starts_with("bn")) {
      for (size_t j = 0; j < model.value(i).size(); ++j) {
        model.value(i)[j] = 0.5f + 0.1f * static_cast<float>(j % 7);
      }
    }
  }
  backprop(model, p);
  int checked = 0;
  for (size_t i = 0; i < model.num_parameters(); ++i) {
    std::span<float> w = model.value(i);
    const std::vector<float> analytic(model.grad(i).begin(), model.grad(i).end());
    for (size_t j = 0; j < w.size(); ++j) {
      const float h = 1e-3f, keep = w[j];
      w[j] = keep + h;
      const double up = mean_loss(model, p);
      w[j] = keep - h;
      const double down = mean_loss(model, p);
      w[j] = keep;
      const double numeric = (up - down) / (2.0 * h);
      EXPECT_NEAR(analytic[j], numeric, 2e-3 + 2e-2 * std::abs(numeric))
          << model.name(i) << "[" << j << "]";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 12 * 7 + 7 + 7 + 7 * 5 + 5 + 5 + 5 * 4 + 4);
}

TEST(TrainMlp, ReportsEachGradientOnceLastLayerFirst) {
  Mlp model(kShape, 5, local());
  const std::vector<size_t> order = backprop(model, make_problem(kShape, 2));
  // out.bias, out.weight, bn2.bias, bn2.weight, fc2.weight, bn1.bias, bn1.weight, fc1.weight
  EXPECT_EQ(order, (std::vector<size_t>{7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(model.name(0), "fc1.weight");
  EXPECT_EQ(model.name(7), "out.bias");
  EXPECT_TRUE(model.decays(0));
  EXPECT_FALSE(model.decays(1));
  EXPECT_FALSE(model.decays(7));
}

TEST(TrainMlp, GradientsAccumulateAcrossBackwardPasses) {
  Mlp model(kShape, 5, local());
  const Problem p = make_problem(kShape, 3);
  backprop(model, p);
  std::vector<std::vector<float>> once;
  for (size_t i = 0; i < model.num_parameters(); ++i) {
    once.emplace_back(model.grad(i).begin(), model.grad(i).end());
  }
  backprop(model, p);
  for (size_t i = 0; i < model.num_parameters(); ++i) {
    for (size_t j = 0; j < once[i].size(); ++j) {
      EXPECT_NEAR(model.grad(i)[j], 2 * once[i][j], 1e-5 + 1e-5 * std::abs(once[i][j]));
    }
  }
}

TEST(TrainMlp, SameSeedSameModelOtherSeedOther) {
  Mlp a(kShape, 9, local()), b(kShape, 9, local()), c(kShape, 10, local());
  EXPECT_EQ(std::vector<float>(a.value(0).begin(), a.value(0).end()),
            std::vector<float>(b.value(0).begin(), b.value(0).end()));
  EXPECT_NE(std::vector<float>(a.value(0).begin(), a.value(0).end()),
            std::vector<float>(c.value(0).begin(), c.value(0).end()));
  // U(-1/sqrt(fan_in), 1/sqrt(fan_in))
  for (float w : a.value(0)) EXPECT_LE(std::abs(w), 1.0f / std::sqrt(12.0f));
}

// On one rank SyncBatchNorm is plain batch norm: the adapter must give the same forward,
// gradients (accumulated, not overwritten) and running statistics as LocalBatchNorm.
TEST(TrainMlp, SyncBatchNormOnOneRankMatchesLocal) {
  testing::run_ranks(1, [&](procgroup::Group& group, int) {
    Mlp a(kShape, 4, local());
    Mlp b(kShape, 4, [&](int c) { return make_sync_batch_norm(group, c); });
    const Problem p = make_problem(kShape, 8);
    for (int pass = 0; pass < 2; ++pass) {
      backprop(a, p);
      backprop(b, p);
    }
    for (size_t i = 0; i < a.num_parameters(); ++i) {
      for (size_t j = 0; j < a.grad(i).size(); ++j) {
        EXPECT_NEAR(a.grad(i)[j], b.grad(i)[j], 1e-5) << a.name(i) << "[" << j << "]";
      }
    }
    auto ba = a.buffers(), bb = b.buffers();
    ASSERT_EQ(ba.size(), bb.size());
    for (size_t k = 0; k < ba.size(); ++k) {
      EXPECT_EQ(ba[k].name, bb[k].name);
      for (size_t j = 0; j < ba[k].tensor.numel; ++j) {
        EXPECT_NEAR(static_cast<float*>(ba[k].tensor.data)[j],
                    static_cast<float*>(bb[k].tensor.data)[j], 1e-6);
      }
    }
  });
}

TEST(TrainSgd, MomentumAndWeightDecayFollowPytorch) {
  Mlp model(kShape, 1, local());
  Sgd sgd(model, {.momentum = 0.9f, .weight_decay = 0.1f});
  const float w0 = model.value(0)[0], b0 = model.value(7)[0];
  for (size_t i = 0; i < model.num_parameters(); ++i) {
    std::fill(model.grad(i).begin(), model.grad(i).end(), 1.0f);
  }
  sgd.step(model, 0.5f);
  const float v1 = 1.0f + 0.1f * w0;  // decays: Linear weight
  EXPECT_FLOAT_EQ(model.value(0)[0], w0 - 0.5f * v1);
  EXPECT_FLOAT_EQ(model.value(7)[0], b0 - 0.5f * 1.0f);  // bias: no decay
  const float w1 = model.value(0)[0];
  sgd.step(model, 0.5f);
  EXPECT_FLOAT_EQ(model.value(0)[0], w1 - 0.5f * (0.9f * v1 + 1.0f + 0.1f * w1));
}

TEST(TrainSgd, CosineScheduleGoesFromBaseToZero) {
  EXPECT_FLOAT_EQ(learning_rate(0.1f, Schedule::kCosine, 0, 100), 0.1f);
  EXPECT_NEAR(learning_rate(0.1f, Schedule::kCosine, 50, 100), 0.05f, 1e-7);
  EXPECT_NEAR(learning_rate(0.1f, Schedule::kCosine, 100, 100), 0.0f, 1e-7);
  EXPECT_FLOAT_EQ(learning_rate(0.1f, Schedule::kConstant, 70, 100), 0.1f);
  EXPECT_THROW(parse_schedule("linear"), std::invalid_argument);
}

}  // namespace
}  // namespace fashion_mnist
