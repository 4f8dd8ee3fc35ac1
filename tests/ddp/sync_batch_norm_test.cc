// SyncBatchNorm on ranks with uneven local batches (one of them empty) against plain batch
// normalisation of the concatenated batch in double precision: outputs, running statistics,
// and all three gradients; eval without communication; too few values is an error everywhere.
#include "procgroup/ddp/sync_batch_norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "batch_norm_reference.h"
#include "ddp_test_util.h"
#include "procgroup/ddp/error.h"

namespace procgroup::ddp::testing {
namespace {

void check_against_reference(const std::vector<int>& rows,
                             const std::string& backend = "loopback") {
  const int world = static_cast<int>(rows.size());
  const int total = std::accumulate(rows.begin(), rows.end(), 0);
  std::vector<int> first(world, 0);
  for (int r = 1; r < world; ++r) first[r] = first[r - 1] + rows[r - 1];
  const size_t per_row = kC * kS;
  std::vector<double> rm(kC, 0.0), rv(kC, 1.0);

  for (uint64_t it = 0; it < 2; ++it) {
    std::vector<float> x(total * per_row), dy(total * per_row);
    for (size_t k = 0; k < x.size(); ++k) {
      x[k] = input(it, k);
      dy[k] = grad_out(k);
    }
    const Reference ref(x, dy, total, rm, rv);
    std::vector<float> y(x.size()), dx(x.size());
    std::vector<std::vector<float>> dw(world), db(world), running(world);
    // Each iteration starts from fresh modules whose running stats continue the last ones.
    auto rank_body = [&](Group& group, int rank) {
      SyncBatchNorm bn(group, kC, {kEps, kMomentum, true, true});
      for (int c = 0; c < kC; ++c) {
        bn.weight()[c] = weight(c);
        bn.bias()[c] = bias(c);
        bn.running_mean()[c] = static_cast<float>(rm[c]);
        bn.running_var()[c] = static_cast<float>(rv[c]);
      }
      const size_t at = first[rank] * per_row, len = rows[rank] * per_row;
      std::span<const float> xs(x.data() + at, len);
      bn.forward(xs, rows[rank], kS, std::span(y.data() + at, len));
      dw[rank].resize(kC);
      db[rank].resize(kC);
      bn.backward(xs, std::span<const float>(dy.data() + at, len), std::span(dx.data() + at, len),
                  dw[rank], db[rank]);
      for (int c = 0; c < kC; ++c) {
        running[rank].push_back(bn.running_mean()[c]);
        running[rank].push_back(bn.running_var()[c]);
      }
      EXPECT_EQ(bn.num_batches_tracked(), 1);
    };
    run_ranks(world, rank_body, {.backend = backend});
    for (int r = 0; r < world; ++r) {
      ASSERT_EQ(running[r].size(), 2u * kC) << "rank " << r << " failed";
    }
    for (size_t k = 0; k < x.size(); ++k) {
      ASSERT_NEAR(y[k], ref.y[k], 2e-6 * (1 + std::abs(ref.y[k]))) << "y " << k;
      ASSERT_NEAR(dx[k], ref.dx[k], 2e-6 * (1 + std::abs(ref.dx[k]))) << "dx " << k;
    }
    for (int c = 0; c < kC; ++c) {
      // Each rank returns its own contribution; their sum is the whole batch's gradient.
      double sum_dw = 0, sum_db = 0;
      for (int r = 0; r < world; ++r) {
        sum_dw += dw[r][c];
        sum_db += db[r][c];
        EXPECT_NEAR(running[r][2 * c], ref.running_mean[c], 1e-6) << "rank " << r;
        EXPECT_NEAR(running[r][2 * c + 1], ref.running_var[c], 1e-6 * ref.running_var[c]);
      }
      EXPECT_NEAR(sum_dw, ref.dweight[c], 1e-5 * (1 + std::abs(ref.dweight[c]))) << c;
      EXPECT_NEAR(sum_db, ref.dbias[c], 1e-5 * (1 + std::abs(ref.dbias[c]))) << c;
    }
    rm = ref.running_mean;
    rv = ref.running_var;
  }
}

TEST(DdpSyncBatchNorm, UnevenBatchesWithAnEmptyRankMatchTheConcatenatedBatch) {
  check_against_reference({3, 0, 5, 1});
}
TEST(DdpSyncBatchNorm, ThroughTheCoresEmulatedCollectives) {
  check_against_reference({2, 0, 3}, "loopback_p2p");
}
TEST(DdpSyncBatchNorm, TwoRanks) { check_against_reference({2, 2}); }
TEST(DdpSyncBatchNorm, OneRankHoldsEverything) { check_against_reference({0, 4, 0}); }
TEST(DdpSyncBatchNorm, SingleRank) { check_against_reference({5}); }

TEST(DdpSyncBatchNorm, EvalUsesRunningStatisticsWithoutCommunication) {
  // Only rank 0 runs eval: any collective would time out (5 s) and fail.
  run_ranks(2,
            [](Group& group, int rank) {
              if (rank != 0) return;
              SyncBatchNorm bn(group, 2);
              bn.running_mean()[1] = 2.0f;
              bn.running_var()[1] = 4.0f;
              bn.weight()[1] = 3.0f;
              bn.bias()[1] = 1.0f;
              bn.eval();
              const std::vector<float> x = {5.0f, 6.0f};  // n 1, C 2, spatial 1
              std::vector<float> y(2), dx(2), dw(2), db(2);
              bn.forward(x, 1, 1, y);
              EXPECT_NEAR(y[0], 5.0 / std::sqrt(1 + 1e-5), 1e-5);
              EXPECT_NEAR(y[1], (6.0 - 2.0) / std::sqrt(4 + 1e-5) * 3 + 1, 1e-5);
              const std::vector<float> dy = {1.0f, 1.0f};
              bn.backward(x, dy, dx, dw, db);
              EXPECT_NEAR(dx[1], 3.0 / std::sqrt(4 + 1e-5), 1e-5);
              EXPECT_EQ(bn.num_batches_tracked(), 0);
            },
            {.backend = "loopback", .timeout_ms = 5000});
}

TEST(DdpSyncBatchNorm, OneValuePerChannelOverAllRanksIsAnErrorOnEveryRank) {
  std::vector<std::string> errors(2);
  run_ranks(2, [&](Group& group, int rank) {
    SyncBatchNorm bn(group, 2);
    const std::vector<float> x(rank == 0 ? 2 : 0, 1.0f);
    std::vector<float> y(x.size());
    try {
      bn.forward(x, rank == 0 ? 1 : 0, 1, y);
    } catch (const Error& e) {
      errors[rank] = e.what();
    }
  });
  for (const auto& e : errors)
    EXPECT_NE(e.find("more than 1 value per channel"), std::string::npos) << e;
}

}  // namespace
}  // namespace procgroup::ddp::testing
