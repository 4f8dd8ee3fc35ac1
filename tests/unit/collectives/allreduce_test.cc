// fallback_allreduce over threads: every dtype, op, count and in-place form on world sizes
// 1..8, both algorithms (recursive doubling below kAllreduceSmallBytes, ring above), and
// bitwise-identical results on all ranks for non-integer data.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/collective_util.h"
#include "harness.h"

namespace procgroup::detail::testing {
namespace {

class AllreduceTest : public ::testing::TestWithParam<int> {};

// Runs one allreduce of `count` elements in `form` and checks every rank against the
// reference; returns each rank's output.
std::vector<Bytes> check_allreduce(int size, pg_dtype_t dtype, pg_reduce_op_t op, uint64_t count,
                                   Form form, ThreadWorld* world = nullptr) {
  const std::string what = fmt::format("allreduce size {} {} count {} {}", size,
                                       describe(dtype, op), count, form_name(form));
  std::vector<Bytes> inputs, outputs;
  for (int r = 0; r < size; ++r) {
    inputs.push_back(make_input(dtype, op, r, count));
    outputs.push_back(form == Form::kOutOfPlace ? garbage(inputs.back().size()) : inputs.back());
  }
  auto body = [&](Transport& t) {
    const auto r = static_cast<size_t>(t.rank());
    CollectiveArgs a;
    a.output = outputs[r].data();
    a.input = form == Form::kOutOfPlace    ? inputs[r].data()
              : form == Form::kInPlaceSame ? outputs[r].data()
                                           : nullptr;
    a.count = count;
    a.dtype = dtype;
    a.reduce_op = op;
    a.tag_base = 7;
    return fallback_allreduce(t, a);
  };
  if (world != nullptr) {
    for (const Status& s : world->run(body)) EXPECT_TRUE(s.ok()) << what << ": " << s.to_string();
  } else {
    run_all_ok(size, body, what);
  }
  const Bytes expected = reference_reduce(dtype, op, size, count);
  for (int r = 0; r < size; ++r) {
    EXPECT_TRUE(same_bytes(dtype, expected, outputs[static_cast<size_t>(r)]))
        << what << ", rank " << r;
    if (form == Form::kOutOfPlace) {
      EXPECT_EQ(inputs[static_cast<size_t>(r)], make_input(dtype, op, r, count))
          << what << ": input of rank " << r << " modified";
    }
  }
  return outputs;
}

TEST_P(AllreduceTest, EveryDtypeOpCountAndForm) {
  const int size = GetParam();
  for (pg_dtype_t dtype : kAllDtypes) {
    for (pg_reduce_op_t op : kAllOps) {
      for (uint64_t count : kCounts) {
        for (Form form : kAllForms) check_allreduce(size, dtype, op, count, form);
      }
    }
  }
}

// Just below/at and just above the threshold, for every element size: the results are
// right either way, and the number of sends shows which algorithm ran.
TEST_P(AllreduceTest, ThresholdSelectsAlgorithm) {
  const int size = GetParam();
  int pof2 = 1, log2_pof2 = 0;
  while (pof2 * 2 <= size) pof2 *= 2, ++log2_pof2;
  const int rem = size - pof2;
  for (pg_dtype_t dtype : {PG_DTYPE_F64, PG_DTYPE_F32, PG_DTYPE_BF16, PG_DTYPE_U8}) {
    const uint64_t at = kAllreduceSmallBytes / dtype_size(dtype);
    for (uint64_t count : {at, at + 1}) {
      for (pg_reduce_op_t op : {PG_REDUCE_SUM, PG_REDUCE_AVG, PG_REDUCE_MAX}) {
        ThreadWorld world(size, kTimeout);
        check_allreduce(size, dtype, op, count, Form::kOutOfPlace, &world);
        for (int r = 0; r < size; ++r) {
          uint64_t expected_sends = 2 * static_cast<uint64_t>(size - 1);  // ring
          if (count == at) {  // recursive doubling: fold-in, log2(p) exchanges, fold-out
            expected_sends = r < 2 * rem ? (r % 2 == 0 ? 1 : log2_pof2 + 1) : log2_pof2;
          }
          EXPECT_EQ(world.sends_posted(r), expected_sends)
              << "size " << size << " count " << count << " rank " << r;
        }
      }
    }
  }
}

// A large f32 message exercises the ring with uneven blocks (count % size != 0).
TEST_P(AllreduceTest, LargeRing) {
  const int size = GetParam();
  const uint64_t count = (uint64_t{1} << 20) + 3;
  check_allreduce(size, PG_DTYPE_F32, PG_REDUCE_SUM, count, Form::kOutOfPlace);
  check_allreduce(size, PG_DTYPE_F32, PG_REDUCE_AVG, count, Form::kInPlaceNull);
}

// The ring's blocks: contiguous, covering the count exactly, sizes differing by at most
// one (empty ones when count < size, as reduce_scatter and allgather never produce but a
// tiny ring would).
TEST_P(AllreduceTest, PartitionCoversCountEvenly) {
  const int size = GetParam();
  for (uint64_t total : {uint64_t{0}, uint64_t{1}, uint64_t{5}, uint64_t{1000}, uint64_t{1027}}) {
    const Partition p{total, size};
    uint64_t sum = 0;
    for (int i = 0; i < size; ++i) {
      EXPECT_EQ(p.offset(i), sum) << total << " " << i;
      EXPECT_LE(p.count(i), p.max_count());
      EXPECT_GE(p.count(i) + 1, p.max_count());
      sum += p.count(i);
    }
    EXPECT_EQ(sum, total);
  }
}

// Non-integer data: rounding depends on the order of operations, so this checks that all
// ranks combine in the same order (identical bits) on both algorithms, and that the result
// is close to the exact sum.
TEST_P(AllreduceTest, BitwiseIdenticalOnAllRanks) {
  const int size = GetParam();
  for (pg_dtype_t dtype : {PG_DTYPE_F32, PG_DTYPE_F64, PG_DTYPE_F16, PG_DTYPE_BF16}) {
    for (pg_reduce_op_t op : {PG_REDUCE_SUM, PG_REDUCE_AVG, PG_REDUCE_PROD}) {
      const size_t elem = dtype_size(dtype);
      for (uint64_t count : {uint64_t{1001}, kAllreduceSmallBytes / elem + 13}) {
        std::vector<Bytes> data;
        uint64_t state = 0x9e3779b97f4a7c15ull;
        for (int r = 0; r < size; ++r) {
          data.emplace_back(count * elem);
          for (uint64_t i = 0; i < count; ++i) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            // In [0.5, 1.5): products stay in range, sums round in every dtype.
            const double v = 0.5 + static_cast<double>(state >> 11) / 9007199254740992.0;
            store(dtype, data.back().data(), i, v);
          }
        }
        std::vector<Bytes> originals = data;
        run_all_ok(
            size,
            [&](Transport& t) {
              CollectiveArgs a;
              a.output = data[static_cast<size_t>(t.rank())].data();
              a.count = count;
              a.dtype = dtype;
              a.reduce_op = op;
              return fallback_allreduce(t, a);
            },
            "bitwise identical");
        for (int r = 1; r < size; ++r) {
          ASSERT_EQ(data[0], data[static_cast<size_t>(r)])
              << describe(dtype, op) << " count " << count << ": rank " << r << " differs";
        }
        if (dtype != PG_DTYPE_F32 && dtype != PG_DTYPE_F64) continue;
        for (uint64_t i = 0; i < count; ++i) {
          double exact = op == PG_REDUCE_PROD ? 1 : 0;
          for (const Bytes& b : originals) {
            exact = op == PG_REDUCE_PROD ? exact * load(dtype, b.data(), i)
                                         : exact + load(dtype, b.data(), i);
          }
          if (op == PG_REDUCE_AVG) exact /= size;
          ASSERT_NEAR(load(dtype, data[0].data(), i), exact, std::fabs(exact) * 1e-5)
              << describe(dtype, op) << " element " << i;
        }
      }
    }
  }
}

TEST(AllreduceArgs, InvalidArgumentsFailWithoutCommunicating) {
  std::vector<float> in(8), out(8);
  auto expect_invalid = [&](CollectiveArgs a, const char* what) {
    ThreadWorld world(3, kTimeout);
    for (const Status& s : world.run([&](Transport& t) { return fallback_allreduce(t, a); })) {
      EXPECT_EQ(s.code(), PG_ERR_INVALID_ARGUMENT) << what << ": " << s.to_string();
    }
    for (int r = 0; r < 3; ++r) EXPECT_EQ(world.sends_posted(r), 0u) << what;
  };
  CollectiveArgs good;
  good.input = in.data();
  good.output = out.data();
  good.count = 8;
  good.dtype = PG_DTYPE_F32;
  CollectiveArgs a = good;
  a.dtype = PG_DTYPE_INVALID;
  expect_invalid(a, "dtype 0");
  a = good;
  a.dtype = PG_DTYPE_COUNT_;
  expect_invalid(a, "dtype out of range");
  a = good;
  a.reduce_op = PG_REDUCE_COUNT_;
  expect_invalid(a, "reduce op out of range");
  a = good;
  a.output = nullptr;
  expect_invalid(a, "null output");
  a = good;
  a.input = out.data() + 1;
  expect_invalid(a, "partial overlap");
  a = good;
  a.count = UINT64_MAX / 2;
  expect_invalid(a, "count overflow");
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, AllreduceTest, ::testing::ValuesIn(kWorldSizes),
                         [](const auto& param) { return "size" + std::to_string(param.param); });

}  // namespace
}  // namespace procgroup::detail::testing
