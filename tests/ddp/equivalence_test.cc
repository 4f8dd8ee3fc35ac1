// The defining property of data parallelism: N ranks with per-rank batch b train exactly
// like one process with batch N*b (to float tolerance), step after step — for several
// bucket layouts, with gradients as bucket views or copied, and with no_sync accumulation
// over k micro-batches matching one batch k times larger.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "ddp_test_util.h"
#include "mlp.h"
#include "procgroup/ddp/reducer.h"

namespace procgroup::ddp::testing {
namespace {

constexpr int kSteps = 5;
constexpr int kRows = 3;  // per rank and micro-batch
constexpr uint64_t kDataSeed = 11;
constexpr float kLr = 0.2f, kMomentum = 0.9f;

struct Case {
  int world;
  size_t first_bucket_bytes, bucket_cap_bytes;
  bool view;
  int accumulate;  // micro-batches per step (no_sync for all but the last)
};

std::string name_of(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return "world" + std::to_string(c.world) + "_first" + std::to_string(c.first_bucket_bytes) +
         "_cap" + std::to_string(c.bucket_cap_bytes) + (c.view ? "_view" : "_copy") + "_acc" +
         std::to_string(c.accumulate);
}

// Parameters after each step of one process training on the whole batch.
std::vector<std::vector<float>> reference_run(const Case& c) {
  Mlp model = Mlp::make({}, 7);
  Sgd sgd(model, kLr, kMomentum);
  GradStore grads(model);
  const int rows = c.world * c.accumulate * kRows;
  std::vector<std::vector<float>> after;
  for (int step = 0; step < kSteps; ++step) {
    const Batch batch = make_batch(model.shape, rows, kDataSeed, step);
    grads.zero();
    backward(model, batch, 1.0f / rows, grads.spans(), [](size_t) {});
    sgd.step(model, grads.spans());
    after.push_back(model.flat());
  }
  return after;
}

Grads reducer_grads(Reducer& reducer) {
  Grads g;
  for (size_t k = 0; k < kMlpParams; ++k) g[k] = reducer.grad_as<float>(k);
  return g;
}

std::vector<std::vector<float>> ddp_run(Group& group, int rank, const Case& c) {
  // Different initial values on every rank: the Reducer's broadcast from rank 0 fixes them.
  Mlp model = Mlp::make({}, rank == 0 ? 7 : 100 + rank);
  GradStore own(model);
  ReducerOptions options;
  options.first_bucket_bytes = c.first_bucket_bytes;
  options.bucket_cap_bytes = c.bucket_cap_bytes;
  options.gradient_as_bucket_view = c.view;
  Reducer reducer(group, parameters(model, c.view ? Grads{} : own.spans()), options);
  Sgd sgd(model, kLr, kMomentum);
  const int rows = c.world * c.accumulate * kRows;
  std::vector<std::vector<float>> after;
  for (int step = 0; step < kSteps; ++step) {
    const Batch batch = make_batch(model.shape, rows, kDataSeed, step);
    for (int micro = 0; micro < c.accumulate; ++micro) {
      const Batch mine = batch.slice((rank * c.accumulate + micro) * kRows, kRows);
      std::optional<NoSync> no_sync;
      if (micro + 1 < c.accumulate) no_sync.emplace(reducer.no_sync());
      backward(model, mine, 1.0f / (c.accumulate * kRows), reducer_grads(reducer),
               [&](size_t k) { reducer.mark_grad_ready(k); });
      reducer.finalize();
    }
    sgd.step(model, reducer_grads(reducer));
    reducer.zero_grad();
    after.push_back(model.flat());
  }
  return after;
}

class DdpEquivalence : public ::testing::TestWithParam<Case> {};

TEST_P(DdpEquivalence, RanksTrainLikeOneProcessOnTheWholeBatch) {
  const Case c = GetParam();
  const std::vector<std::vector<float>> expected = reference_run(c);
  std::vector<std::vector<std::vector<float>>> got(c.world);
  run_ranks(c.world, [&](Group& group, int rank) { got[rank] = ddp_run(group, rank, c); });
  for (int rank = 0; rank < c.world; ++rank) {
    ASSERT_EQ(got[rank].size(), static_cast<size_t>(kSteps)) << "rank " << rank;
    for (int step = 0; step < kSteps; ++step) {
      const auto& want = expected[step];
      const auto& have = got[rank][step];
      ASSERT_EQ(have.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_NEAR(have[i], want[i], 2e-6 + 2e-6 * std::abs(want[i]))
            << "rank " << rank << " step " << step << " element " << i;
      }
      // Every rank holds the same bits (the loopback reduces in rank order).
      EXPECT_EQ(have, got[0][step]) << "rank " << rank << " step " << step;
    }
  }
  // Training moved the parameters: the comparison is not between two unchanged models.
  EXPECT_NE(expected.back(), Mlp::make({}, 7).flat());
}

std::vector<Case> cases() {
  // Parameter bytes in ready order: fc2.bias 16, fc2.weight 160, fc1.bias 40, fc1.weight 240.
  const std::pair<size_t, size_t> layouts[] = {
      {size_t{1} << 20, size_t{25} << 20},  // defaults: one bucket
      {0, 0},                               // one bucket per parameter
      {20, 250},                            // [fc2.bias] [fc2.weight fc1.bias] [fc1.weight]
  };
  std::vector<Case> out;
  for (int world = 1; world <= 4; ++world) {
    for (auto [first, cap] : layouts) {
      for (bool view : {false, true}) {
        for (int accumulate : {1, 3}) out.push_back({world, first, cap, view, accumulate});
      }
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Mlp, DdpEquivalence, ::testing::ValuesIn(cases()), name_of);

// The same on a backend with send and recv only: every collective comes from the core.
TEST(DdpEquivalenceBackends, SendRecvOnlyBackend) {
  const Case c{3, 20, 250, true, 2};
  const std::vector<std::vector<float>> expected = reference_run(c);
  std::vector<std::vector<std::vector<float>>> got(c.world);
  run_ranks(c.world, [&](Group& group, int rank) { got[rank] = ddp_run(group, rank, c); },
            {.backend = "loopback_p2p"});
  for (int rank = 0; rank < c.world; ++rank) {
    ASSERT_EQ(got[rank].size(), static_cast<size_t>(kSteps)) << "rank " << rank;
    for (size_t i = 0; i < expected.back().size(); ++i) {
      ASSERT_NEAR(got[rank].back()[i], expected.back()[i],
                  2e-6 + 2e-6 * std::abs(expected.back()[i]));
    }
  }
}

}  // namespace
}  // namespace procgroup::ddp::testing
