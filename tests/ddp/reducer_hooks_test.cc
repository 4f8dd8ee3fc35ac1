// Communication hooks and half precision: fp16/bf16 compression within their precision,
// divide-before-sum keeping half-precision buckets (and compressed wires) from overflowing,
// and one dtype per bucket with mixed parameter dtypes.
#include <gtest/gtest.h>

#include <cmath>

#include "ddp_test_util.h"
#include "procgroup/ddp/half.h"
#include "procgroup/ddp/reducer.h"
#include "reducer_test_util.h"

namespace procgroup::ddp::testing {
namespace {

// Reduces one 257-element f32 gradient per rank through `hook` (null: the Reducer's default),
// copied into the bucket or in it (view); returns each rank's result.
std::vector<std::vector<float>> reduce_with(std::shared_ptr<CommHook> hook, int world,
                                            float (*value)(int rank, size_t i), bool view = false) {
  std::vector<std::vector<float>> got(world);
  run_ranks(world, [&](Group& group, int rank) {
    FloatParams p({257});
    ReducerOptions o;
    o.comm_hook = hook;
    o.gradient_as_bucket_view = view;
    Reducer reducer(group, p.parameters(), o);
    float* grad = view ? reducer.grad_as<float>(0).data() : p.grads[0].data();
    for (size_t i = 0; i < 257; ++i) grad[i] = value(rank, i);
    reducer.mark_grad_ready(0);
    reducer.finalize();
    got[rank].assign(grad, grad + 257);
  });
  for (int r = 0; r < world; ++r) {
    if (got[r].size() != 257) {
      ADD_FAILURE() << "rank " << r << " failed";
      got[r].assign(257, std::nanf(""));
    }
  }
  return got;
}

float irregular(int rank, size_t i) {
  return std::sin(static_cast<float>(i) * 0.37f + rank) * (1.0f + static_cast<float>(i) / 16);
}

void check_compression(std::shared_ptr<CommHook> hook, double relative) {
  constexpr int kWorld = 3;
  const auto got = reduce_with(hook, kWorld, irregular);
  size_t inexact = 0;
  for (size_t i = 0; i < 257; ++i) {
    double mean = 0;
    for (int r = 0; r < kWorld; ++r) mean += irregular(r, i) / static_cast<double>(kWorld);
    const double scale = 1.0 + static_cast<double>(i) / 16;  // magnitude of the inputs
    EXPECT_NEAR(got[0][i], mean, relative * scale) << i;
    inexact += got[0][i] != static_cast<float>(mean);
    for (int r = 1; r < kWorld; ++r) EXPECT_EQ(got[r][i], got[0][i]) << "rank " << r;
  }
  EXPECT_GT(inexact, 100u) << "the hook did not compress";
}

// The default hook leaves the division to the allreduce (PG_REDUCE_AVG): at 2 ranks exactly
// what dividing first gives, at 3 the mean within the roundings of a sum and a divide, with
// the gradients copied into the bucket or living in it.
TEST(DdpReducerHooks, TheDefaultHookAveragesInTheAllreduce) {
  EXPECT_EQ(allreduce_avg_hook()->name(), "allreduce_avg");
  EXPECT_TRUE(allreduce_avg_hook()->averages());
  EXPECT_FALSE(allreduce_hook()->averages());
  for (bool view : {false, true}) {
    SCOPED_TRACE(view ? "bucket view" : "copied");
    EXPECT_EQ(reduce_with(nullptr, 2, irregular, view),
              reduce_with(allreduce_hook(), 2, irregular, view));
    const auto got = reduce_with(nullptr, 3, irregular, view);
    for (size_t i = 0; i < 257; ++i) {
      double mean = 0;
      for (int r = 0; r < 3; ++r) mean += irregular(r, i) / 3.0;
      EXPECT_NEAR(got[0][i], mean, 4 * std::ldexp(1.0, -24) * (1.0 + static_cast<double>(i) / 16))
          << i;
      for (int r = 1; r < 3; ++r) EXPECT_EQ(got[r][i], got[0][i]) << "rank " << r;
    }
  }
}

// Three roundings of at most half an ulp each, plus the sum's: 2^-11 and 2^-8 per rounding.
TEST(DdpReducerHooks, Fp16CompressionIsWithinHalfPrecision) {
  check_compression(fp16_compress_hook(), 4 * std::ldexp(1.0, -11));
}
TEST(DdpReducerHooks, Bf16CompressionIsWithinBfloat16Precision) {
  check_compression(bf16_compress_hook(), 4 * std::ldexp(1.0, -8));
}

TEST(DdpReducerHooks, Fp16CompressionDividesBeforeConvertingSoLargeGradientsSurvive) {
  // Rank 0 holds 120000 (beyond half's 65504); the mean 30000 is representable. Converting
  // before dividing (PyTorch's fp16_compress_hook) would give inf.
  const auto got = reduce_with(fp16_compress_hook(), 4,
                               [](int rank, size_t) { return rank == 0 ? 120000.0f : 0.0f; });
  for (const auto& g : got) {
    EXPECT_TRUE(std::isfinite(g[0]));
    EXPECT_NEAR(g[0], 30000.0f, 30000 * std::ldexp(1.0, -10));
  }
}

TEST(DdpReducerHalf, HalfBucketsDivideBeforeSumming) {
  // 4 ranks x 40000 in f16: summing first overflows to inf; the mean is 40000.
  run_ranks(4, [](Group& group, int) {
    std::vector<Half> values(8, to_half(0.0f)), grads(8, to_half(40000.0f));
    std::vector<BFloat16> bvalues(8, to_bfloat16(0.0f)), bgrads(8, to_bfloat16(3.0e38f));
    Reducer reducer(group, {Parameter::of("h", std::span(values), std::span(grads)),
                            Parameter::of("b", std::span(bvalues), std::span(bgrads))});
    EXPECT_EQ(reducer.num_buckets(), 2u);  // one dtype per bucket
    reducer.mark_grad_ready(1);
    reducer.mark_grad_ready(0);
    reducer.finalize();
    for (Half h : grads) EXPECT_EQ(to_float(h), 40000.0f);
    for (BFloat16 b : bgrads) EXPECT_NEAR(to_float(b), 3.0e38f, 3.0e38f * 0.01f);
  });
}

TEST(DdpReducerHooks, MixedDtypesGetOneBucketEachAndAreAveraged) {
  run_ranks(2, [](Group& group, int rank) {
    std::vector<float> f(5, 0), gf(5, rank + 1.0f);
    std::vector<double> d(3, 0), gd(3, 10.0 * (rank + 1));
    std::vector<float> f2(4, 0), gf2(4, 100.0f * (rank + 1));
    Reducer reducer(group, {Parameter::of("f", std::span(f), std::span(gf)),
                            Parameter::of("d", std::span(d), std::span(gd)),
                            Parameter::of("f2", std::span(f2), std::span(gf2))});
    const auto buckets = reducer.bucket_params();
    ASSERT_EQ(buckets.size(), 2u);
    EXPECT_EQ(buckets[0], (std::vector<size_t>{2, 0}));  // f32, in reverse order
    EXPECT_EQ(buckets[1], (std::vector<size_t>{1}));     // f64
    for (size_t k : {2, 1, 0}) reducer.mark_grad_ready(k);
    reducer.finalize();
    EXPECT_EQ(gf[0], 1.5f);
    EXPECT_EQ(gd[0], 15.0);
    EXPECT_EQ(gf2[0], 150.0f);
  });
}

TEST(DdpReducerHooks, EmptyParametersAndBucketsAreFine) {
  for (bool view : {false, true}) {
    run_ranks(2, [&](Group& group, int rank) {
      std::vector<float> none, g0, one(1, 0.0f), g1(1, rank * 2.0f);
      ReducerOptions o;
      o.first_bucket_bytes = 0;  // the empty parameter gets a bucket of its own
      o.bucket_cap_bytes = 0;
      o.gradient_as_bucket_view = view;
      Reducer reducer(group,
                      {Parameter::of("empty", std::span(none), std::span(g0)),
                       Parameter::of("one", std::span(one), std::span(g1))},
                      o);
      EXPECT_EQ(reducer.num_buckets(), 2u);
      reducer.grad_as<float>(1)[0] = rank * 2.0f;
      reducer.mark_grad_ready(1);
      reducer.mark_grad_ready(0);
      reducer.finalize();
      EXPECT_EQ(reducer.grad_as<float>(1)[0], 1.0f);
      EXPECT_TRUE(reducer.grad_as<float>(0).empty());
    });
  }
}

}  // namespace
}  // namespace procgroup::ddp::testing
