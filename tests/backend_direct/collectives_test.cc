// What the loopback plugin promises beyond the conformance suite (tests/conformance, the
// judge of every collective's results on every backend, loopback included): an f32
// allreduce adds in rank order, so every rank gets the same bits as a sum over ranks
// 0, 1, 2, ... computed here. Called through its function table on 1-5 ranks (threads).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "direct_harness.h"

namespace procgroup::direct {
namespace {

class CollectivesBySize : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    plugin_ = std::make_unique<Plugin>(PG_LOOPBACK_PATH);
    ASSERT_EQ(plugin_->status(), PG_OK) << plugin_->error();
    world_ = std::make_unique<World>(*plugin_, GetParam(), WorldOptions{.timeout_ms = 10000});
    ASSERT_TRUE(world_->ok()) << world_->create_error(0);
  }
  void TearDown() override {
    world_.reset();
    plugin_.reset();
  }

  std::unique_ptr<Plugin> plugin_;
  std::unique_ptr<World> world_;
};

// f32 sums of values of mixed magnitude are order-sensitive: every rank must get the same
// bits, and exactly the rank-order (0, 1, 2, ...) result.
TEST_P(CollectivesBySize, AllreduceIsBitIdenticalInRankOrder) {
  const int s = world_->size();
  const uint64_t n = 4099;
  std::vector<std::vector<float>> data(s, std::vector<float>(n));
  std::mt19937 gen(42);
  std::uniform_real_distribution<float> mantissa(-1, 1);
  std::uniform_int_distribution<int> exponent(-20, 20);
  for (auto& v : data) {
    for (float& x : v) x = std::ldexp(mantissa(gen), exponent(gen));
  }
  std::vector<float> expected = data[0];
  for (int r = 1; r < s; ++r) {
    for (uint64_t i = 0; i < n; ++i) expected[i] += data[r][i];
  }
  std::vector<std::vector<float>> results(s, std::vector<float>(n));
  world_->run([&](int r) {
    pg_buffer_t ib = cpu(data[r].data(), n, PG_DTYPE_F32);
    ASSERT_EQ(world_->call(r, op(PG_OP_ALLREDUCE, ib, cpu(results[r].data(), n, PG_DTYPE_F32))),
              PG_OK);
  });
  for (int r = 0; r < s; ++r) {
    EXPECT_EQ(std::memcmp(results[r].data(), expected.data(), n * sizeof(float)), 0) << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Loopback, CollectivesBySize, ::testing::Values(1, 2, 3, 4, 5),
                         [](const auto& param_info) {
                           return "size" + std::to_string(param_info.param);
                         });

}  // namespace
}  // namespace procgroup::direct
