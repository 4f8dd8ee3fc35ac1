// Every collective of the loopback plugin, called through its function table on 1-5 ranks
// (threads), f32 and i32, every root, sizes 0/1/odd/large, in place and not, against a
// reference computed here with the same rank order (so results must match exactly).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "direct_harness.h"

namespace procgroup::direct {
namespace {

constexpr uint64_t kCounts[] = {0, 1, 7, 1029};
constexpr pg_reduce_op_t kReduceOps[] = {PG_REDUCE_SUM, PG_REDUCE_AVG, PG_REDUCE_PROD,
                                         PG_REDUCE_MIN, PG_REDUCE_MAX};
enum class Place { kOut, kIn, kSamePointer };  // kSamePointer: input.data == output.data

template <class T>
constexpr pg_dtype_t dtype_of() {
  return std::is_same_v<T, float> ? PG_DTYPE_F32 : PG_DTYPE_I32;
}

// Rank r's element i in test case `salt`: small positive integers keep sums and products
// exact, and vary across ranks so min/max/root choice matter.
template <class T>
T value(int rank, uint64_t i, int salt) {
  return static_cast<T>((static_cast<uint64_t>(rank) * 7 + i * 3 + salt) % 5 + 1);
}

// Reduction over ranks 0..size-1 of element i, as the plugin must compute it.
template <class T>
T reduced(int size, uint64_t i, int salt, pg_reduce_op_t op) {
  T acc = value<T>(0, i, salt);
  for (int r = 1; r < size; ++r) acc = reduce_ref(acc, value<T>(r, i, salt), op);
  return op == PG_REDUCE_AVG ? scale_ref(acc, size) : acc;
}

template <class T>
std::vector<T> values(int rank, uint64_t n, int salt) {
  std::vector<T> v(n);
  for (uint64_t i = 0; i < n; ++i) v[i] = value<T>(rank, i, salt);
  return v;
}

#define CASE_INFO "rank " << r << " n " << n << " in_place " << in_place << " salt " << salt

template <class T>
void check_allreduce(World& w) {
  const pg_dtype_t dt = dtype_of<T>();
  w.run([&](int r) {
    int salt = 0;
    for (pg_reduce_op_t rop : kReduceOps) {
      for (uint64_t n : kCounts) {
        for (bool in_place : {false, true}) {
          ++salt;
          std::vector<T> in = values<T>(r, n, salt), out(n, T(-1));
          pg_buffer_t ib = cpu(in.data(), n, dt);
          pg_buffer_t ob = in_place ? ib : cpu(out.data(), n, dt);
          ASSERT_EQ(w.call(r, op(PG_OP_ALLREDUCE, ib, ob, {.reduce_op = rop})), PG_OK) << CASE_INFO;
          const std::vector<T>& res = in_place ? in : out;
          for (uint64_t i = 0; i < n; ++i) {
            ASSERT_EQ(res[i], reduced<T>(w.size(), i, salt, rop)) << CASE_INFO << " op " << rop;
          }
          if (!in_place) {
            ASSERT_EQ(in, values<T>(r, n, salt)) << "input changed " << CASE_INFO;
          }
        }
      }
    }
  });
}

template <class T>
void check_broadcast(World& w) {
  const pg_dtype_t dt = dtype_of<T>();
  w.run([&](int r) {
    int salt = 0;
    for (int root = 0; root < w.size(); ++root) {
      for (uint64_t n : kCounts) {
        for (bool in_place : {false, true}) {
          ++salt;
          std::vector<T> in = values<T>(r, n, salt), out(n, T(-1));
          pg_buffer_t ib = cpu(in.data(), n, dt);
          pg_buffer_t ob = in_place ? ib : cpu(out.data(), n, dt);
          ASSERT_EQ(w.call(r, op(PG_OP_BROADCAST, ib, ob, {.root = root})), PG_OK) << CASE_INFO;
          ASSERT_EQ(in_place ? in : out, values<T>(root, n, salt)) << CASE_INFO << " root " << root;
          if (!in_place) {
            ASSERT_EQ(in, values<T>(r, n, salt)) << "input changed " << CASE_INFO;
          }
        }
      }
    }
  });
}

template <class T>
void check_reduce(World& w) {
  const pg_dtype_t dt = dtype_of<T>();
  w.run([&](int r) {
    int salt = 0;
    for (int root = 0; root < w.size(); ++root) {
      for (pg_reduce_op_t rop : kReduceOps) {
        for (uint64_t n : kCounts) {
          for (bool in_place : {false, true}) {
            ++salt;
            std::vector<T> in = values<T>(r, n, salt), out(n, T(-1));
            pg_buffer_t ib = cpu(in.data(), n, dt);
            // Non-roots pass no output out of place; in place their buffer must stay intact.
            pg_buffer_t ob = in_place ? ib : r == root ? cpu(out.data(), n, dt) : absent();
            ASSERT_EQ(w.call(r, op(PG_OP_REDUCE, ib, ob, {.root = root, .reduce_op = rop})), PG_OK)
                << CASE_INFO;
            if (r != root) {
              ASSERT_EQ(in, values<T>(r, n, salt)) << "non-root buffer changed " << CASE_INFO;
              continue;
            }
            const std::vector<T>& res = in_place ? in : out;
            for (uint64_t i = 0; i < n; ++i) {
              ASSERT_EQ(res[i], reduced<T>(w.size(), i, salt, rop)) << CASE_INFO << " op " << rop;
            }
          }
        }
      }
    }
  });
}

// allgather (rooted = false) and gather: block j of the output holds rank j's input.
template <class T>
void check_gathers(World& w, bool rooted) {
  const pg_dtype_t dt = dtype_of<T>();
  const pg_op_t kind = rooted ? PG_OP_GATHER : PG_OP_ALLGATHER;
  const uint64_t s = w.size();
  w.run([&](int r) {
    int salt = 0;
    for (int root = 0; root < (rooted ? w.size() : 1); ++root) {
      const bool receives = !rooted || r == root;
      for (uint64_t n : kCounts) {
        for (Place place : {Place::kOut, Place::kIn, Place::kSamePointer}) {
          const bool in_place = place != Place::kOut;
          ++salt;
          std::vector<T> in = values<T>(r, n, salt), out(s * n, T(-1));
          if (in_place && receives) std::copy(in.begin(), in.end(), out.begin() + r * n);
          pg_buffer_t ib = cpu(in.data(), n, dt);
          pg_buffer_t ob = receives ? cpu(out.data(), s * n, dt) : absent();
          if (in_place && receives) {
            ib = cpu(out.data() + (place == Place::kIn ? r * n : 0), n, dt);
          }
          ASSERT_EQ(w.call(r, op(kind, ib, ob, {.root = root})), PG_OK) << CASE_INFO;
          ASSERT_EQ(in, values<T>(r, n, salt)) << "input changed " << CASE_INFO;
          if (!receives) continue;
          for (uint64_t j = 0; j < s; ++j) {
            std::vector<T> block(out.begin() + j * n, out.begin() + (j + 1) * n);
            ASSERT_EQ(block, values<T>(j, n, salt)) << CASE_INFO << " block " << j;
          }
        }
      }
    }
  });
}

template <class T>
void check_reduce_scatter(World& w) {
  const pg_dtype_t dt = dtype_of<T>();
  const uint64_t s = w.size();
  w.run([&](int r) {
    int salt = 0;
    for (pg_reduce_op_t rop : kReduceOps) {
      for (uint64_t n : kCounts) {
        for (bool in_place : {false, true}) {
          ++salt;
          std::vector<T> in = values<T>(r, s * n, salt), out(n, T(-1));
          pg_buffer_t ib = cpu(in.data(), s * n, dt);
          T* result = in_place ? in.data() + r * n : out.data();
          pg_buffer_t ob = cpu(result, n, dt);
          ASSERT_EQ(w.call(r, op(PG_OP_REDUCE_SCATTER, ib, ob, {.reduce_op = rop})), PG_OK)
              << CASE_INFO;
          for (uint64_t i = 0; i < n; ++i) {
            ASSERT_EQ(result[i], reduced<T>(w.size(), r * n + i, salt, rop)) << CASE_INFO;
          }
        }
      }
    }
  });
}

template <class T>
void check_scatter(World& w) {
  const pg_dtype_t dt = dtype_of<T>();
  const uint64_t s = w.size();
  w.run([&](int r) {
    int salt = 0;
    for (int root = 0; root < w.size(); ++root) {
      for (uint64_t n : kCounts) {
        for (bool in_place : {false, true}) {
          ++salt;
          std::vector<T> in = values<T>(r, s * n, salt), out(n, T(-1));
          const bool in_root_buffer = in_place && r == root;
          T* result = in_root_buffer ? in.data() + r * n : out.data();
          pg_buffer_t ib = r == root ? cpu(in.data(), s * n, dt) : absent();
          pg_buffer_t ob = cpu(result, n, dt);
          ASSERT_EQ(w.call(r, op(PG_OP_SCATTER, ib, ob, {.root = root})), PG_OK) << CASE_INFO;
          for (uint64_t i = 0; i < n; ++i) {
            ASSERT_EQ(result[i], value<T>(root, r * n + i, salt)) << CASE_INFO << " root " << root;
          }
        }
      }
    }
  });
}

template <class T>
void check_alltoall(World& w) {
  const pg_dtype_t dt = dtype_of<T>();
  const uint64_t s = w.size();
  w.run([&](int r) {
    int salt = 0;
    for (uint64_t n : kCounts) {
      for (bool in_place : {false, true}) {
        ++salt;
        std::vector<T> in = values<T>(r, s * n, salt), out(s * n, T(-1));
        pg_buffer_t ib = cpu(in.data(), s * n, dt);
        pg_buffer_t ob = in_place ? ib : cpu(out.data(), s * n, dt);
        ASSERT_EQ(w.call(r, op(PG_OP_ALLTOALL, ib, ob)), PG_OK) << CASE_INFO;
        const std::vector<T>& res = in_place ? in : out;
        for (uint64_t j = 0; j < s; ++j) {
          for (uint64_t i = 0; i < n; ++i) {
            // Block j comes from rank j, which sent us its block r.
            ASSERT_EQ(res[j * n + i], value<T>(j, r * n + i, salt)) << CASE_INFO << " j " << j;
          }
        }
      }
    }
  });
}

class Collectives : public ::testing::TestWithParam<std::tuple<int, pg_dtype_t>> {
 protected:
  void SetUp() override {
    plugin_ = std::make_unique<Plugin>(PG_LOOPBACK_PATH);
    ASSERT_EQ(plugin_->status(), PG_OK) << plugin_->error();
    world_ = std::make_unique<World>(*plugin_, std::get<0>(GetParam()),
                                     WorldOptions{.timeout_ms = 10000});
    ASSERT_TRUE(world_->ok()) << world_->create_error(0);
  }
  void TearDown() override {
    world_.reset();
    plugin_.reset();
  }
  bool f32() const { return std::get<1>(GetParam()) == PG_DTYPE_F32; }

  std::unique_ptr<Plugin> plugin_;
  std::unique_ptr<World> world_;
};

// Dtype-independent checks, per world size.
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

TEST_P(Collectives, Allreduce) {
  f32() ? check_allreduce<float>(*world_) : check_allreduce<int32_t>(*world_);
}
TEST_P(Collectives, Broadcast) {
  f32() ? check_broadcast<float>(*world_) : check_broadcast<int32_t>(*world_);
}
TEST_P(Collectives, Reduce) {
  f32() ? check_reduce<float>(*world_) : check_reduce<int32_t>(*world_);
}
TEST_P(Collectives, Allgather) {
  f32() ? check_gathers<float>(*world_, false) : check_gathers<int32_t>(*world_, false);
}
TEST_P(Collectives, Gather) {
  f32() ? check_gathers<float>(*world_, true) : check_gathers<int32_t>(*world_, true);
}
TEST_P(Collectives, ReduceScatter) {
  f32() ? check_reduce_scatter<float>(*world_) : check_reduce_scatter<int32_t>(*world_);
}
TEST_P(Collectives, Scatter) {
  f32() ? check_scatter<float>(*world_) : check_scatter<int32_t>(*world_);
}
TEST_P(Collectives, Alltoall) {
  f32() ? check_alltoall<float>(*world_) : check_alltoall<int32_t>(*world_);
}

// No rank leaves a barrier before every rank has entered it.
TEST_P(CollectivesBySize, BarrierWaitsForEveryRank) {
  std::atomic<int> entered{0};
  world_->run([&](int r) {
    for (int round = 1; round <= 3; ++round) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5 * r));
      entered.fetch_add(1);
      ASSERT_EQ(world_->call(r, op(PG_OP_BARRIER, absent(), absent())), PG_OK);
      EXPECT_GE(entered.load(), round * world_->size()) << "rank " << r << " round " << round;
      ASSERT_EQ(world_->call(r, op(PG_OP_BARRIER, absent(), absent())), PG_OK);
    }
  });
}

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

// Other dtypes: 64-bit reductions through the host kernels, 1- and 2-byte copies.
TEST_P(CollectivesBySize, OtherDtypes) {
  const int s = world_->size();
  world_->run([&](int r) {
    std::vector<double> d = {r + 0.5, -1.0 * r};
    ASSERT_EQ(world_->call(r, op(PG_OP_ALLREDUCE, cpu(d.data(), 2, PG_DTYPE_F64),
                                 cpu(d.data(), 2, PG_DTYPE_F64), {.reduce_op = PG_REDUCE_AVG})),
              PG_OK);
    double sum = 0;
    for (int k = 0; k < s; ++k) sum += k;
    EXPECT_DOUBLE_EQ(d[0], (sum + 0.5 * s) / s);
    std::vector<int64_t> big = {int64_t{1} << 40 | r};
    ASSERT_EQ(world_->call(r, op(PG_OP_ALLREDUCE, cpu(big.data(), 1, PG_DTYPE_I64),
                                 cpu(big.data(), 1, PG_DTYPE_I64), {.reduce_op = PG_REDUCE_MAX})),
              PG_OK);
    EXPECT_EQ(big[0], int64_t{1} << 40 | (s - 1));
    std::vector<uint8_t> bytes(3, static_cast<uint8_t>(r)), all(3 * s);
    ASSERT_EQ(world_->call(r, op(PG_OP_ALLGATHER, cpu(bytes.data(), 3, PG_DTYPE_U8),
                                 cpu(all.data(), 3 * s, PG_DTYPE_U8))),
              PG_OK);
    for (int k = 0; k < 3 * s; ++k) EXPECT_EQ(all[k], k / 3);
    std::vector<uint16_t> half(5, static_cast<uint16_t>(0x3c00 + r));
    ASSERT_EQ(world_->call(r, op(PG_OP_BROADCAST, cpu(half.data(), 5, PG_DTYPE_BF16),
                                 cpu(half.data(), 5, PG_DTYPE_BF16), {.root = s - 1})),
              PG_OK);
    EXPECT_EQ(half[4], 0x3c00 + s - 1);
  });
}

INSTANTIATE_TEST_SUITE_P(Loopback, Collectives,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5),
                                            ::testing::Values(PG_DTYPE_F32, PG_DTYPE_I32)),
                         [](const auto& param_info) {
                           return "size" + std::to_string(std::get<0>(param_info.param)) +
                                  (std::get<1>(param_info.param) == PG_DTYPE_F32 ? "_f32" : "_i32");
                         });

INSTANTIATE_TEST_SUITE_P(Loopback, CollectivesBySize, ::testing::Values(1, 2, 3, 4, 5),
                         [](const auto& param_info) {
                           return "size" + std::to_string(param_info.param);
                         });

}  // namespace
}  // namespace procgroup::direct
