// Bucket assignment: reverse order, small first bucket then the cap, one dtype and device
// per bucket, never past a limit unless a single gradient is larger.
#include "procgroup/ddp/bucket_assignment.h"

#include <gtest/gtest.h>

namespace procgroup::ddp {
namespace {

using Buckets = std::vector<std::vector<size_t>>;

Parameter param(uint64_t numel, pg_dtype_t dtype = PG_DTYPE_F32, Device device = {}) {
  Parameter p;
  p.numel = numel;
  p.dtype = dtype;
  p.device = device;
  return p;
}

Buckets layout(const std::vector<Parameter>& params, BucketLimits limits,
               std::vector<size_t> order = {}) {
  if (order.empty()) order = reverse_order(params.size());
  Buckets out;
  for (const BucketSpec& b : assign_buckets(params, order, limits)) out.push_back(b.params);
  return out;
}

TEST(DdpBucketAssignment, ReverseOrderWithSmallFirstBucketThenCap) {
  // 10 x 100 floats (400 bytes each); first bucket 800 bytes, then 1600.
  std::vector<Parameter> params(10, param(100));
  EXPECT_EQ(layout(params, {800, 1600}), (Buckets{{9, 8}, {7, 6, 5, 4}, {3, 2, 1, 0}}));
}

TEST(DdpBucketAssignment, DefaultsAreOneMebibyteThenTwentyFive) {
  const BucketLimits defaults;
  EXPECT_EQ(defaults.first_bucket_bytes, size_t{1} << 20);
  EXPECT_EQ(defaults.bucket_cap_bytes, size_t{25} << 20);
  // 64 gradients of 1 MiB: 1 in the first bucket, then 25 per bucket.
  std::vector<Parameter> params(64, param(1 << 18));
  const auto buckets = assign_buckets(params, reverse_order(64), defaults);
  ASSERT_EQ(buckets.size(), 4u);
  EXPECT_EQ(buckets[0].bytes, size_t{1} << 20);
  EXPECT_EQ(buckets[1].bytes, size_t{25} << 20);
  EXPECT_EQ(buckets[2].bytes, size_t{25} << 20);
  EXPECT_EQ(buckets[3].bytes, size_t{13} << 20);
}

TEST(DdpBucketAssignment, NeverExceedsTheLimitUnlessOneGradientDoes) {
  std::vector<Parameter> params = {param(10), param(300), param(50), param(60)};
  // Reverse order: 60 (240 B), 50 (200 B), 300 (1200 B), 10 (40 B); limits 400 / 500.
  EXPECT_EQ(layout(params, {400, 500}), (Buckets{{3}, {2}, {1}, {0}}));
  EXPECT_EQ(layout(params, {500, 500}), (Buckets{{3, 2}, {1}, {0}}));
  for (const BucketSpec& b : assign_buckets(params, reverse_order(4), {400, 500})) {
    EXPECT_TRUE(b.bytes <= 500 || b.params.size() == 1);
  }
}

TEST(DdpBucketAssignment, ZeroLimitsGiveOneBucketPerGradient) {
  std::vector<Parameter> params(3, param(7));
  EXPECT_EQ(layout(params, {0, 0}), (Buckets{{2}, {1}, {0}}));
}

TEST(DdpBucketAssignment, OneDtypeAndDevicePerBucketOrderedByFirstReadyGradient) {
  std::vector<Parameter> params = {param(4, PG_DTYPE_F32), param(4, PG_DTYPE_F64),
                                   param(4, PG_DTYPE_F32), param(4, PG_DTYPE_F16),
                                   param(4, PG_DTYPE_F32, {PG_DEVICE_CUDA, 0})};
  const auto buckets = assign_buckets(params, reverse_order(5), {1 << 20, 1 << 20});
  ASSERT_EQ(buckets.size(), 4u);
  EXPECT_EQ(buckets[0].params, (std::vector<size_t>{4}));  // cuda f32
  EXPECT_EQ(buckets[1].params, (std::vector<size_t>{3}));  // f16
  EXPECT_EQ(buckets[2].params, (std::vector<size_t>{2, 0}));
  EXPECT_EQ(buckets[2].dtype, PG_DTYPE_F32);
  EXPECT_EQ(buckets[2].numel, 8u);
  EXPECT_EQ(buckets[3].params, (std::vector<size_t>{1}));
  EXPECT_EQ(buckets[3].bytes, 32u);
}

TEST(DdpBucketAssignment, FollowsAGivenOrder) {
  std::vector<Parameter> params(4, param(100));
  EXPECT_EQ(layout(params, {400, 800}, {1, 3, 0, 2}), (Buckets{{1}, {3, 0}, {2}}));
}

TEST(DdpBucketAssignment, EmptyAndZeroSizedParameters) {
  EXPECT_TRUE(assign_buckets({}, {}, {}).empty());
  std::vector<Parameter> params = {param(0), param(5)};
  EXPECT_EQ(layout(params, {0, 0}), (Buckets{{1}, {0}}));
}

}  // namespace
}  // namespace procgroup::ddp
