// allgather, reduce_scatter, alltoall and barrier over threads: every dtype, op, count and
// in-place form on world sizes 1..8 (power-of-two and not: alltoall pairs differently).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "collectives/algorithms.h"
#include "harness.h"

namespace procgroup::detail::testing {
namespace {

class BlocksTest : public ::testing::TestWithParam<int> {};

TEST_P(BlocksTest, Allgather) {
  const int size = GetParam();
  for (pg_dtype_t dtype : kAllDtypes) {
    for (uint64_t count : kCounts) {
      for (Form form : kAllForms) {
        const std::string what = fmt::format("allgather size {} {} count {} {}", size,
                                             dtype_name(dtype), count, form_name(form));
        const size_t block = count * dtype_size(dtype);
        Bytes expected;
        std::vector<Bytes> inputs, outputs;
        for (int r = 0; r < size; ++r) {
          inputs.push_back(make_input(dtype, PG_REDUCE_SUM, r, count));
          expected.insert(expected.end(), inputs.back().begin(), inputs.back().end());
        }
        for (int r = 0; r < size; ++r) {
          Bytes out = garbage(expected.size());
          if (form != Form::kOutOfPlace) {
            std::copy(inputs[static_cast<size_t>(r)].begin(), inputs[static_cast<size_t>(r)].end(),
                      out.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(r) * block));
          }
          outputs.push_back(out);
        }
        run_all_ok(
            size,
            [&](Transport& t) {
              const auto r = static_cast<size_t>(t.rank());
              CollectiveArgs a;
              a.output = outputs[r].data();
              a.input = form == Form::kOutOfPlace    ? inputs[r].data()
                        : form == Form::kInPlaceSame ? outputs[r].data() + r * block
                                                     : nullptr;
              a.count = count;
              a.dtype = dtype;
              return fallback_allgather(t, a);
            },
            what);
        for (int r = 0; r < size; ++r) {
          EXPECT_TRUE(same_bytes(dtype, expected, outputs[static_cast<size_t>(r)]))
              << what << ", rank " << r;
        }
      }
    }
  }
}

TEST_P(BlocksTest, ReduceScatter) {
  const int size = GetParam();
  const auto n_ranks = static_cast<uint64_t>(size);
  for (pg_dtype_t dtype : kAllDtypes) {
    for (pg_reduce_op_t op : kAllOps) {
      for (uint64_t count : kCounts) {
        for (Form form : kAllForms) {
          const std::string what = fmt::format("reduce_scatter size {} {} count {} {}", size,
                                               describe(dtype, op), count, form_name(form));
          const size_t block = count * dtype_size(dtype);
          std::vector<Bytes> inputs, outputs(static_cast<size_t>(size), garbage(block));
          for (int r = 0; r < size; ++r)
            inputs.push_back(make_input(dtype, op, r, count * n_ranks));
          run_all_ok(
              size,
              [&](Transport& t) {
                const auto r = static_cast<size_t>(t.rank());
                CollectiveArgs a;
                a.input = form == Form::kInPlaceNull ? nullptr : inputs[r].data();
                a.output =
                    form == Form::kOutOfPlace ? outputs[r].data() : inputs[r].data() + r * block;
                a.count = count;
                a.dtype = dtype;
                a.reduce_op = op;
                return fallback_reduce_scatter(t, a);
              },
              what);
          for (int r = 0; r < size; ++r) {
            const auto ru = static_cast<size_t>(r);
            const Bytes expected = reference_reduce(dtype, op, size, count, count * ru);
            Bytes original = make_input(dtype, op, r, count * n_ranks);
            if (form == Form::kOutOfPlace) {
              EXPECT_TRUE(same_bytes(dtype, expected, outputs[ru])) << what << ", rank " << r;
            } else {
              // Block r now holds the result; the other blocks are left as they were.
              std::copy(expected.begin(), expected.end(),
                        original.begin() + static_cast<ptrdiff_t>(ru * block));
            }
            EXPECT_TRUE(same_bytes(dtype, original, inputs[ru])) << what << ", input of " << r;
          }
        }
      }
    }
  }
}

TEST_P(BlocksTest, Alltoall) {
  const int size = GetParam();
  const auto n_ranks = static_cast<uint64_t>(size);
  for (pg_dtype_t dtype : kAllDtypes) {
    for (uint64_t count : kCounts) {
      for (Form form : kAllForms) {
        const std::string what = fmt::format("alltoall size {} {} count {} {}", size,
                                             dtype_name(dtype), count, form_name(form));
        const size_t total = count * n_ranks * dtype_size(dtype);
        std::vector<Bytes> inputs, outputs;
        for (int r = 0; r < size; ++r) {
          inputs.push_back(make_input(dtype, PG_REDUCE_SUM, r, count * n_ranks));
          outputs.push_back(form == Form::kOutOfPlace ? garbage(total) : inputs.back());
        }
        run_all_ok(
            size,
            [&](Transport& t) {
              const auto r = static_cast<size_t>(t.rank());
              CollectiveArgs a;
              a.output = outputs[r].data();
              a.input = form == Form::kOutOfPlace    ? inputs[r].data()
                        : form == Form::kInPlaceSame ? outputs[r].data()
                                                     : nullptr;
              a.count = count;
              a.dtype = dtype;
              return fallback_alltoall(t, a);
            },
            what);
        for (int r = 0; r < size; ++r) {
          // Block i of rank r's output is block r of rank i's input.
          Bytes expected;
          for (int i = 0; i < size; ++i) {
            const Bytes b =
                make_input(dtype, PG_REDUCE_SUM, i, count, count * static_cast<uint64_t>(r));
            expected.insert(expected.end(), b.begin(), b.end());
          }
          EXPECT_TRUE(same_bytes(dtype, expected, outputs[static_cast<size_t>(r)]))
              << what << ", rank " << r;
          if (form == Form::kOutOfPlace) {
            EXPECT_EQ(inputs[static_cast<size_t>(r)],
                      make_input(dtype, PG_REDUCE_SUM, r, count * n_ranks))
                << what << ": input modified";
          }
        }
      }
    }
  }
}

// No rank may leave the barrier before every rank has entered it. The last rank enters
// late, so a barrier that let anyone through early would be caught seeing a short count.
TEST_P(BlocksTest, BarrierWaitsForEveryRank) {
  const int size = GetParam();
  constexpr int kRounds = 3;
  std::atomic<int> arrived[kRounds] = {};
  std::atomic<int> early{0};
  run_all_ok(
      size,
      [&](Transport& t) {
        for (int round = 0; round < kRounds; ++round) {
          if (t.rank() == t.size() - 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
          arrived[round].fetch_add(1);
          CollectiveArgs a;
          a.tag_base = static_cast<uint64_t>(round) * kTagsPerCollective;
          PG_RETURN_IF_ERROR(fallback_barrier(t, a));
          if (arrived[round].load() != t.size()) early.fetch_add(1);
        }
        return ok_status();
      },
      "barrier");
  EXPECT_EQ(early.load(), 0);
}

TEST_P(BlocksTest, BarrierSendsLogSizeMessages) {
  const int size = GetParam();
  ThreadWorld world(size, kTimeout);
  for (const Status& s : world.run([](Transport& t) { return fallback_barrier(t, {}); })) {
    EXPECT_TRUE(s.ok()) << s.to_string();
  }
  uint64_t rounds = 0;
  while ((1 << rounds) < size) ++rounds;
  for (int r = 0; r < size; ++r) EXPECT_EQ(world.sends_posted(r), rounds);
}

// A large alltoall, in place, on the non-power-of-two path (whole-input scratch) and the
// XOR path (one-block scratch).
TEST_P(BlocksTest, LargeAlltoallInPlace) {
  const int size = GetParam();
  const uint64_t count = 50001;
  const auto n_ranks = static_cast<uint64_t>(size);
  std::vector<Bytes> data;
  for (int r = 0; r < size; ++r)
    data.push_back(make_input(PG_DTYPE_I32, PG_REDUCE_SUM, r, count * n_ranks));
  run_all_ok(
      size,
      [&](Transport& t) {
        CollectiveArgs a;
        a.output = data[static_cast<size_t>(t.rank())].data();
        a.count = count;
        a.dtype = PG_DTYPE_I32;
        return fallback_alltoall(t, a);
      },
      "large alltoall");
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i < size; ++i) {
      const Bytes expected =
          make_input(PG_DTYPE_I32, PG_REDUCE_SUM, i, count, count * static_cast<uint64_t>(r));
      const Bytes got(
          data[static_cast<size_t>(r)].begin() + static_cast<ptrdiff_t>(i * count * 4),
          data[static_cast<size_t>(r)].begin() + static_cast<ptrdiff_t>((i + 1) * count * 4));
      ASSERT_TRUE(same_bytes(PG_DTYPE_I32, expected, got)) << "rank " << r << " block " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, BlocksTest, ::testing::ValuesIn(kWorldSizes),
                         [](const auto& param) { return "size" + std::to_string(param.param); });

}  // namespace
}  // namespace procgroup::detail::testing
