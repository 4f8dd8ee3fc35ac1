// Reducer features on ranks as threads: overlap with backward, bucket rebuild from the
// observed order, unused parameters (declared and detected), compression hooks, half
// precision without overflow, and one dtype per bucket.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <thread>

#include "ddp_test_util.h"
#include "procgroup/ddp/half.h"
#include "procgroup/ddp/reducer.h"
#include "reducer_test_util.h"

namespace procgroup::ddp::testing {
namespace {

ReducerOptions one_bucket_per_param() {
  ReducerOptions o;
  o.first_bucket_bytes = 0;
  o.bucket_cap_bytes = 0;
  return o;
}

TEST(DdpReducerOverlap, FirstBucketIsReducedBeforeBackwardMarksTheRest) {
  run_ranks(2, [](Group& group, int rank) {
    FloatParams p({1000, 1000, 1000, 1000});
    int marked = 0;
    auto probe = std::make_shared<ProbeHook>(&marked);
    ReducerOptions o = one_bucket_per_param();
    o.comm_hook = probe;
    Reducer reducer(group, p.parameters(), o);
    for (size_t k : {3, 2, 1, 0}) {
      for (size_t i = 0; i < 1000; ++i) p.grads[k][i] = grad_value(rank, k, i);
      reducer.mark_grad_ready(k);
      ++marked;
      if (k == 3) {
        // Started inside the first mark, and completes while backward is still going.
        ASSERT_EQ(probe->starts.size(), 1u);
        EXPECT_EQ(probe->starts[0].marked_before, 0);
        EXPECT_TRUE(probe->completes(0));
      }
    }
    reducer.finalize();
    ASSERT_EQ(probe->starts.size(), 4u);
    for (size_t b = 0; b < 4; ++b) EXPECT_EQ(probe->starts[b].marked_before, static_cast<int>(b));
    for (size_t k = 0; k < 4; ++k) {
      EXPECT_EQ(p.grads[k][5], (grad_value(0, k, 5) + grad_value(1, k, 5)) / 2) << k;
    }
  });
}

// Gradients after each of `passes` passes; rank 0 and the others mark in different orders.
std::vector<std::vector<std::vector<float>>> marked_run(Group& group, int rank, bool rebuild,
                                                        bool view, Reducer** out = nullptr) {
  FloatParams p({5, 7, 3, 11});
  ReducerOptions o = one_bucket_per_param();
  o.rebuild_buckets = rebuild;
  o.gradient_as_bucket_view = view;
  Reducer reducer(group, p.parameters(), o);
  if (out) *out = &reducer;
  const std::vector<size_t> order =
      rank == 0 ? std::vector<size_t>{1, 3, 0, 2} : std::vector<size_t>{0, 1, 2, 3};
  std::vector<std::vector<std::vector<float>>> result;
  for (int pass = 0; pass < 3; ++pass) {
    for (size_t k : order) {
      std::span<float> g = reducer.grad_as<float>(k);
      for (size_t i = 0; i < g.size(); ++i) g[i] += grad_value(rank, k, i) * (pass + 1);
      reducer.mark_grad_ready(k);
    }
    reducer.finalize();
    std::vector<std::vector<float>> grads;
    for (size_t k = 0; k < 4; ++k) {
      auto g = reducer.grad_as<float>(k);
      grads.emplace_back(g.begin(), g.end());
    }
    result.push_back(grads);
    if (pass == 0 && rebuild) {
      EXPECT_EQ(reducer.layout_generation(), 1);
      // Rank 0's order, adopted by every rank.
      EXPECT_EQ(reducer.bucket_params(), (std::vector<std::vector<size_t>>{{1}, {3}, {0}, {2}}));
    }
    reducer.zero_grad();
  }
  return result;
}

TEST(DdpReducerRebuild, AdoptsRankZerosOrderAndKeepsResultsIdentical) {
  for (bool view : {false, true}) {
    std::vector<std::vector<std::vector<std::vector<float>>>> with(3), without(3);
    run_ranks(3, [&](Group& group, int rank) {
      with[rank] = marked_run(group, rank, true, view);
      without[rank] = marked_run(group, rank, false, view);
    });
    for (int rank = 0; rank < 3; ++rank) {
      EXPECT_EQ(with[rank], without[rank]) << "view " << view << " rank " << rank;
      EXPECT_EQ(with[rank], with[0]) << "view " << view << " rank " << rank;
    }
  }
}

TEST(DdpReducerRebuild, RebuiltFirstBucketLaunchesOnTheFirstObservedGradient) {
  run_ranks(2, [](Group& group, int) {
    FloatParams p({4, 4, 4});
    int marked = 0;
    auto probe = std::make_shared<ProbeHook>(&marked);
    ReducerOptions o = one_bucket_per_param();
    o.comm_hook = probe;
    Reducer reducer(group, p.parameters(), o);
    for (int pass = 0; pass < 2; ++pass) {
      marked = 0;
      probe->starts.clear();
      for (size_t k : {0, 1, 2}) {  // registration order, not the assumed reverse
        reducer.mark_grad_ready(k);
        ++marked;
      }
      reducer.finalize();
      // Pass 0: bucket 0 holds p2, so nothing starts before the last mark; pass 1: rebuilt.
      ASSERT_EQ(probe->starts.size(), 3u);
      EXPECT_EQ(probe->starts.front().marked_before, pass == 0 ? 2 : 0) << "pass " << pass;
    }
  });
}

TEST(DdpReducerRebuild, UnchangedOrderKeepsGradientStorage) {
  run_ranks(2, [](Group& group, int) {
    FloatParams p({4, 4});
    ReducerOptions o = one_bucket_per_param();
    o.gradient_as_bucket_view = true;
    Reducer reducer(group, p.parameters(), o);
    void* before = reducer.grad(0).data;
    reducer.mark_grad_ready(1);
    reducer.mark_grad_ready(0);
    reducer.finalize();
    EXPECT_EQ(reducer.layout_generation(), 0);
    EXPECT_EQ(reducer.grad(0).data, before);
  });
}

// Each rank leaves some parameters out; the result is the mean with zeros for them.
void check_unused(bool declared) {
  const std::vector<std::vector<size_t>> unused = {{2}, {}, {0, 2, 1}};
  std::vector<std::vector<std::vector<float>>> got(3);
  run_ranks(3, [&](Group& group, int rank) {
    FloatParams p({6, 6, 6, 6});
    ReducerOptions o = one_bucket_per_param();
    o.find_unused_parameters = !declared;
    Reducer reducer(group, p.parameters(), o);
    const auto& skip = unused[rank];
    if (declared) reducer.prepare_for_backward(skip);
    for (size_t k : {3, 2, 1, 0}) {
      if (std::find(skip.begin(), skip.end(), k) != skip.end()) continue;
      for (size_t i = 0; i < 6; ++i) p.grads[k][i] = grad_value(rank, k, i);
      reducer.mark_grad_ready(k);
    }
    reducer.finalize();
    got[rank] = p.grads;
  });
  for (int r = 0; r < 3; ++r) ASSERT_EQ(got[r].size(), 4u) << "rank " << r << " failed";
  for (size_t k = 0; k < 4; ++k) {
    for (size_t i = 0; i < 6; ++i) {
      float sum = 0;
      for (int r = 0; r < 3; ++r) {
        const auto& skip = unused[r];
        if (std::find(skip.begin(), skip.end(), k) == skip.end()) sum += grad_value(r, k, i) / 3;
      }
      for (int r = 0; r < 3; ++r) EXPECT_FLOAT_EQ(got[r][k][i], sum) << k << " " << i;
    }
  }
  for (int r = 1; r < 3; ++r) EXPECT_EQ(got[r], got[0]);  // consistent on every rank
}

TEST(DdpReducerUnused, DeclaredUnusedAreReducedConsistently) { check_unused(true); }
TEST(DdpReducerUnused, DetectedUnusedAreReducedConsistently) { check_unused(false); }

TEST(DdpReducerUnused, BucketOfDeclaredUnusedLaunchesAtPrepare) {
  run_ranks(2, [](Group& group, int) {
    FloatParams p({3, 3});
    auto probe = std::make_shared<ProbeHook>(nullptr);
    ReducerOptions o = one_bucket_per_param();
    o.comm_hook = probe;
    Reducer reducer(group, p.parameters(), o);
    reducer.prepare_for_backward(std::vector<size_t>{1});  // bucket 0 holds p1
    EXPECT_EQ(probe->starts.size(), 1u);
    reducer.mark_grad_ready(0);
    reducer.finalize();
  });
}

TEST(DdpReducerUnused, GradientAccumulatedUnderNoSyncIsReducedWhenUnusedInTheSyncedPass) {
  std::vector<std::vector<float>> got(2);
  run_ranks(2, [&](Group& group, int rank) {
    FloatParams p({4, 4});
    ReducerOptions o = one_bucket_per_param();
    o.find_unused_parameters = true;
    Reducer reducer(group, p.parameters(), o);
    {
      NoSync guard = reducer.no_sync();
      for (size_t k : {1, 0}) {
        for (size_t i = 0; i < 4; ++i) p.grads[k][i] += grad_value(rank, k, i);
        reducer.mark_grad_ready(k);
      }
      reducer.finalize();
    }
    // Synced pass: rank 0 does not use p1 at all.
    for (size_t k : {1, 0}) {
      if (rank == 0 && k == 1) continue;
      for (size_t i = 0; i < 4; ++i) p.grads[k][i] += grad_value(rank, k, i);
      reducer.mark_grad_ready(k);
    }
    reducer.finalize();
    got[rank] = p.grads[1];
  });
  for (int r = 0; r < 2; ++r) ASSERT_EQ(got[r].size(), 4u) << "rank " << r << " failed";
  for (size_t i = 0; i < 4; ++i) {
    const float want = (grad_value(0, 1, i) + 2 * grad_value(1, 1, i)) / 2;
    EXPECT_FLOAT_EQ(got[0][i], want);
    EXPECT_EQ(got[1][i], got[0][i]);
  }
}

TEST(DdpReducerThreads, GradientsMarkedFromSeveralThreadsAtOnce) {
  constexpr size_t kParams = 16;
  run_ranks(2, [](Group& group, int rank) {
    FloatParams p(std::vector<size_t>(kParams, 100));
    ReducerOptions o;
    o.first_bucket_bytes = 800;
    o.bucket_cap_bytes = 1600;
    Reducer reducer(group, p.parameters(), o);
    for (int pass = 0; pass < 3; ++pass) {
      std::vector<std::thread> threads;
      for (size_t t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
          for (size_t k = t; k < kParams; k += 4) {
            for (size_t i = 0; i < 100; ++i) p.grads[k][i] = grad_value(rank, k, i);
            reducer.mark_grad_ready(k);
          }
        });
      }
      for (auto& t : threads) t.join();
      reducer.finalize();
      for (size_t k = 0; k < kParams; ++k) {
        EXPECT_EQ(p.grads[k][7], (grad_value(0, k, 7) + grad_value(1, k, 7)) / 2) << k;
      }
    }
  });
}

}  // namespace
}  // namespace procgroup::ddp::testing
