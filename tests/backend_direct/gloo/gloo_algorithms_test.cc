// Both of the plugin's allreduce algorithms (ring and bcube, forced through
// PROCGROUP_GLOO_ALLREDUCE, and the automatic choice on a large buffer), and the rounding of
// f16/bf16 reductions against an independent round-to-nearest-even reference.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gloo_test_support.h"
#include "gloo_typed_buffer.h"

namespace procgroup::gloo_test {
namespace {

using AlgoCase = std::tuple<int, std::string>;  // world size, "ring" / "bcube" / "auto"

class GlooAllreduceAlgorithm : public ::testing::TestWithParam<AlgoCase> {};

TEST_P(GlooAllreduceAlgorithm, MatchesTheReference) {
  const auto [size, algo] = GetParam();
  WorldOptions opts;
  if (algo != "auto") opts.env = {{"PROCGROUP_GLOO_ALLREDUCE", algo}};
  run_world(size, opts, [](RankEnv& r) {
    // 300001 f32 elements (1.2 MB) is above the bcube limit: auto runs ring on it.
    for (size_t n : {size_t{1}, size_t{3}, size_t{4099}, size_t{300001}}) {
      for (pg_dtype_t dt : {PG_DTYPE_F32, PG_DTYPE_BF16, PG_DTYPE_I64}) {
        for (pg_reduce_op_t rop : {PG_REDUCE_SUM, PG_REDUCE_AVG, PG_REDUCE_MAX}) {
          TypedBuffer buf(dt, n);
          for (size_t i = 0; i < n; ++i) buf.set(i, sample(r.rank, i, rop, dt));
          OpArgs a;
          a.reduce_op = rop;
          std::string err;
          const std::string what = std::string("allreduce ") + dtype_label(dt) + " " +
                                   reduce_label(rop) + " n=" + std::to_string(n);
          r.expect_status(r.run(make_op(PG_OP_ALLREDUCE, buf.buffer(), buf.buffer(), a), &err),
                          PG_OK, what + " " + err);
          for (size_t i = 0; i < n; ++i) {
            if (buf.get(i) != reduced(r.size, i, rop, dt)) {
              r.expect(false, what + ": element " + std::to_string(i) + " is " +
                                  std::to_string(buf.get(i)));
              break;
            }
          }
        }
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Algorithms, GlooAllreduceAlgorithm,
                         ::testing::Combine(::testing::Values(2, 3, 4),
                                            ::testing::Values("ring", "bcube", "auto")),
                         [](const ::testing::TestParamInfo<AlgoCase>& p) {
                           return std::get<1>(p.param) + "_size" +
                                  std::to_string(std::get<0>(p.param));
                         });

// With two ranks every element is reduced by exactly one float operation, so the result
// must be that operation rounded to nearest even, bit for bit, for arbitrary values.
TEST(GlooHalfPrecision, TwoRankReductionsRoundToNearestEven) {
  run_world(2, {}, [](RankEnv& r) {
    const size_t n = 20000;
    for (pg_dtype_t dt : {PG_DTYPE_F16, PG_DTYPE_BF16}) {
      auto to = dt == PG_DTYPE_F16 ? to_f16 : to_bf16;
      auto from = dt == PG_DTYPE_F16 ? from_f16 : from_bf16;
      // Both ranks draw both ranks' values from the same seed.
      auto values = [&](int rank) {
        std::mt19937 gen(1234 + rank + 10 * dt);
        std::uniform_real_distribution<double> mag(-8.0, 8.0);
        std::vector<uint16_t> v(n);
        for (auto& x : v) x = to(std::ldexp(mag(gen), static_cast<int>(gen() % 9) - 4));
        return v;
      };
      const std::vector<uint16_t> mine = values(r.rank), a = values(0), b = values(1);
      for (pg_reduce_op_t rop : {PG_REDUCE_SUM, PG_REDUCE_PROD, PG_REDUCE_MIN, PG_REDUCE_AVG}) {
        std::vector<uint16_t> buf = mine;
        OpArgs args;
        args.reduce_op = rop;
        pg_buffer_t pb = cpu(buf.data(), n, dt);
        std::string err;
        const std::string what = std::string(dtype_label(dt)) + " " + reduce_label(rop);
        r.expect_status(r.run(make_op(PG_OP_ALLREDUCE, pb, pb, args), &err), PG_OK, what + err);
        for (size_t i = 0; i < n; ++i) {
          const float x = static_cast<float>(from(a[i])), y = static_cast<float>(from(b[i]));
          const float exact = rop == PG_REDUCE_PROD  ? x * y
                              : rop == PG_REDUCE_MIN ? std::min(x, y)
                                                     : x + y;
          uint16_t want = to(exact);
          if (rop == PG_REDUCE_AVG) want = to(host_scale(from(want), dt, 2));
          if (buf[i] != want) {
            r.expect(false, what + ": element " + std::to_string(i) + " bits " +
                                std::to_string(buf[i]) + ", want " + std::to_string(want));
            break;
          }
        }
      }
    }
  });
}

}  // namespace
}  // namespace procgroup::gloo_test
