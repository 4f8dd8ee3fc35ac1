// procgroup.hpp: what its buffers, options and works hand to the C ABI, and that they work on
// a real group (ranks as threads on the loopback plugin, a private file store).
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <numeric>
#include <span>
#include <string>
#include <thread>
#include <future>
#include <vector>

#include "procgroup/procgroup.hpp"
#include "thread_group.h"  // pgtest::TempDir, pgtest::thread_rank_options

namespace {

using namespace std::chrono_literals;
using procgroup::Buffer;
using procgroup::ConstBuffer;
using procgroup::Group;
using procgroup::ReduceOp;
using Clock = std::chrono::steady_clock;

// Ranks as threads, each with its own procgroup::Group on loopback.
void run_ranks(int size, const std::function<void(Group&, int)>& body,
               std::chrono::milliseconds group_timeout = 30s) {
  pgtest::TempDir dir;
  const std::string url = "file://" + dir.path();
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      pg_group_options_t o =
          pgtest::thread_rank_options(rank, size, "loopback", url.c_str(), group_timeout.count());
      try {
        Group group(o);
        body(group, rank);
      } catch (const procgroup::Error& e) {
        ADD_FAILURE() << "rank " << rank << ": " << e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
}

// What a call's status would be, as the wrapper throws it.
template <class Fn>
pg_status_t status_of(Fn&& fn) {
  try {
    fn();
  } catch (const procgroup::Error& e) {
    return e.status();
  }
  return PG_OK;
}

// Element types by width and sign, so long long works where int64_t is long.
static_assert(procgroup::dtype_of<float>() == PG_DTYPE_F32);
static_assert(procgroup::dtype_of<const double>() == PG_DTYPE_F64);
static_assert(procgroup::dtype_of<procgroup::Half>() == PG_DTYPE_F16);
static_assert(procgroup::dtype_of<procgroup::BFloat16>() == PG_DTYPE_BF16);
static_assert(procgroup::dtype_of<int8_t>() == PG_DTYPE_I8);
static_assert(procgroup::dtype_of<unsigned char>() == PG_DTYPE_U8);
static_assert(procgroup::dtype_of<int>() == PG_DTYPE_I32);
static_assert(procgroup::dtype_of<long long>() == PG_DTYPE_I64);
static_assert(procgroup::dtype_of<long>() == PG_DTYPE_I64);
static_assert(!procgroup::Element<bool> && !procgroup::Element<char> &&
              !procgroup::Element<uint32_t> && !procgroup::Element<std::string>);

// What converts to a buffer, and what is refused at compile time.
static_assert(std::is_convertible_v<std::vector<float>&, Buffer>);
static_assert(std::is_convertible_v<std::array<int32_t, 4>&, Buffer>);
static_assert(std::is_convertible_v<double (&)[3], Buffer>);
static_assert(std::is_convertible_v<std::span<float>, Buffer>);
static_assert(std::is_convertible_v<const std::vector<float>&, ConstBuffer>);
static_assert(!std::is_constructible_v<Buffer, const std::vector<float>&>, "written: not const");
static_assert(!std::is_constructible_v<Buffer, std::span<const float>>);
static_assert(!std::is_constructible_v<ConstBuffer, std::vector<float>&&>,
              "a temporary container would die before the work completes");
static_assert(!std::is_constructible_v<ConstBuffer, std::list<float>&>, "not contiguous");
static_assert(!std::is_constructible_v<ConstBuffer, std::vector<uint32_t>&>, "no u32 dtype");
static_assert(!std::is_constructible_v<Buffer, procgroup::DeviceSpan<const float>>);
static_assert(std::is_constructible_v<ConstBuffer, procgroup::DeviceSpan<const float>>);

void expect_cpu(const pg_buffer_t& b, const void* data, uint64_t count, pg_dtype_t dtype) {
  EXPECT_EQ(b.struct_size, sizeof(pg_buffer_t));
  EXPECT_EQ(b.data, data);
  EXPECT_EQ(b.count, count);
  EXPECT_EQ(b.dtype, dtype);
  EXPECT_EQ(b.device_type, PG_DEVICE_CPU);
  EXPECT_EQ(b.device_index, 0);
  EXPECT_EQ(b.stream, nullptr);
}

TEST(WrapperBuffer, ContainersBecomeCpuBuffers) {
  std::vector<float> v(7);
  std::array<int64_t, 3> a{};
  double c[5] = {};
  const std::vector<int32_t> cv(2);
  std::vector<long long> ll(4);
  expect_cpu(Buffer(v).c_buffer(), v.data(), 7, PG_DTYPE_F32);
  expect_cpu(Buffer(a).c_buffer(), a.data(), 3, PG_DTYPE_I64);
  expect_cpu(Buffer(c).c_buffer(), c, 5, PG_DTYPE_F64);
  expect_cpu(ConstBuffer(cv).c_buffer(), cv.data(), 2, PG_DTYPE_I32);
  expect_cpu(ConstBuffer(std::span(v).subspan(2)).c_buffer(), v.data() + 2, 5, PG_DTYPE_F32);
  expect_cpu(Buffer(ll).c_buffer(), ll.data(), 4, PG_DTYPE_I64);
  // An empty container without storage is an absent buffer (a non-root's output).
  std::vector<float> none;
  EXPECT_EQ(Buffer(none).c_pointer(), nullptr);
  EXPECT_EQ(Buffer(v).c_pointer()->data, v.data());
}

TEST(WrapperBuffer, DeviceSpanFillsDeviceFields) {
  // Never dereferenced on the host: no GPU is needed to describe one.
  auto* gpu = reinterpret_cast<procgroup::BFloat16*>(uintptr_t{0x7f0000001000});
  void* stream = reinterpret_cast<void*>(uintptr_t{0x42});
  const pg_buffer_t b = Buffer(procgroup::cuda_span(gpu, 1000, 3, stream)).c_buffer();
  EXPECT_EQ(b.struct_size, sizeof(pg_buffer_t));
  EXPECT_EQ(b.data, gpu);
  EXPECT_EQ(b.count, 1000u);
  EXPECT_EQ(b.dtype, PG_DTYPE_BF16);
  EXPECT_EQ(b.device_type, PG_DEVICE_CUDA);
  EXPECT_EQ(b.device_index, 3);
  EXPECT_EQ(b.stream, stream);

  const procgroup::DeviceSpan<const int32_t> in{reinterpret_cast<const int32_t*>(gpu), 8,
                                                procgroup::Device::kCuda, 1};
  const pg_buffer_t ib = ConstBuffer(in).c_buffer();
  EXPECT_EQ(ib.dtype, PG_DTYPE_I32);
  EXPECT_EQ(ib.device_index, 1);
  EXPECT_EQ(ib.stream, nullptr);  // the default stream
}

TEST(WrapperGroup, CollectivesOnContainers) {
  run_ranks(2, [](Group& g, int rank) {
    std::vector<int64_t> v(1001, rank + 1);
    g.allreduce(v).wait();
    EXPECT_EQ(v[1000], 3);

    const std::vector<float> in(5, rank == 0 ? 1.5f : 4.0f);
    std::array<float, 5> out{};
    g.allreduce(in, out, ReduceOp::kMax).wait();
    EXPECT_EQ(out[4], 4.0f);

    double b[3] = {rank == 1 ? 2.5 : 0.0, 0, 0};
    g.broadcast(b, 1).wait();
    EXPECT_EQ(b[0], 2.5);

    std::vector<int32_t> all(6, -1);
    const std::array<int32_t, 3> three{rank, rank, rank};
    g.allgather(three, all).wait();
    EXPECT_EQ(all, (std::vector<int32_t>{0, 0, 0, 1, 1, 1}));

    std::vector<int32_t> sum(3), mine(3, rank);
    g.reduce_scatter(all, sum).wait();  // blocks of 3: rank r gets 2 * r
    EXPECT_EQ(sum[2], 2 * rank);

    std::vector<int32_t> root_out(rank == 0 ? 3 : 0);  // empty: absent off the root
    g.reduce(mine, root_out, 0, ReduceOp::kSum).wait();
    if (rank == 0) {
      EXPECT_EQ(root_out[1], 1);
    }

    std::vector<int32_t> sent(2), got(2);
    std::iota(sent.begin(), sent.end(), 10 * rank);
    g.alltoall(sent, got).wait();
    EXPECT_EQ(got[1 - rank], 10 * (1 - rank) + rank);

    std::vector<uint8_t> msg(4, static_cast<uint8_t>(rank == 0 ? 9 : 0));
    if (rank == 0) g.send(msg, 1, 5).wait();
    if (rank == 1) g.recv(msg, 0, 5).wait();
    EXPECT_EQ(msg[3], 9);
    g.barrier().wait();
  });
}

TEST(WrapperGroup, MismatchedDtypesAreRefusedByTheCore) {
  run_ranks(1, [](Group& g, int) {
    std::vector<float> in(4);
    std::vector<int32_t> out(4);
    EXPECT_EQ(status_of([&] { g.allreduce(in, out).wait(); }), PG_ERR_INVALID_ARGUMENT);
  });
}

TEST(WrapperOptions, NegativeTimeoutReachesTheCall) {
  run_ranks(1, [](Group& g, int) {
    std::vector<float> v(4);
    EXPECT_EQ(status_of([&] { g.allreduce(v, ReduceOp::kSum, {.timeout = -1ms}).wait(); }),
              PG_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(pg_last_error()).find("timeout_ms is negative"), std::string::npos)
        << pg_last_error();
    EXPECT_EQ(status_of([&] { g.barrier({.timeout = -5ms}).wait(); }), PG_ERR_INVALID_ARGUMENT);
  });
}

// The operation's timeout, not the group's 30 s, bounds an allreduce whose peer never comes.
TEST(WrapperOptions, OperationTimeoutEndsAWaitForAnAbsentPeer) {
  std::atomic<bool> rank0_done{false};
  run_ranks(2, [&](Group& g, int rank) {
    if (rank == 1) {  // never joins the allreduce; leaves once rank 0 has given up
      while (!rank0_done.load()) std::this_thread::sleep_for(5ms);
      return;
    }
    std::vector<float> v(16, 1.0f);
    const auto start = Clock::now();
    EXPECT_EQ(status_of([&] { g.allreduce(v, ReduceOp::kSum, {.timeout = 200ms}).wait(); }),
              PG_ERR_TIMEOUT);
    const auto took = Clock::now() - start;
    EXPECT_GE(took, 150ms);
    EXPECT_LT(took, 10s) << "the group timeout, not the operation's, ended the wait";
    rank0_done = true;
  });
}

TEST(WrapperWork, WaitForAndTestWhileAPeerIsLate) {
  run_ranks(2, [](Group& g, int rank) {
    std::vector<int32_t> v(8, rank + 1);
    if (rank == 1) {
      std::this_thread::sleep_for(400ms);
      g.allreduce(v).wait();
      EXPECT_EQ(v[7], 3);
      return;
    }
    procgroup::Work w = g.allreduce(v);
    EXPECT_TRUE(w.valid());
    EXPECT_FALSE(w.test());
    auto start = Clock::now();
    EXPECT_FALSE(w.wait_for(50ms));
    EXPECT_GE(Clock::now() - start, 45ms);
    EXPECT_FALSE(w.wait_for(std::chrono::microseconds(10)));  // rounded up, not to "forever"
    start = Clock::now();
    EXPECT_FALSE(w.wait_for(-1s));  // a negative bound only polls
    EXPECT_LT(Clock::now() - start, 100ms);
    EXPECT_TRUE(w.wait_until(Clock::now() + 20s));
    EXPECT_TRUE(w.test());
    EXPECT_EQ(v[7], 3);
  });
}

TEST(WrapperWork, OnCompleteRunsOnceWithTheOutcome) {
  run_ranks(2, [](Group& g, int rank) {
    std::vector<float> v(4, float(rank + 1));
    if (rank == 1) std::this_thread::sleep_for(100ms);  // set while pending on rank 0
    std::promise<pg_status_t> done;
    auto outcome = done.get_future();
    int calls = 0;
    {
      procgroup::Work w = g.allreduce(v);
      w.on_complete([&](pg_status_t status, std::string_view message) {
        EXPECT_TRUE(message.empty()) << message;
        if (++calls == 1) done.set_value(status);
      });
      EXPECT_EQ(status_of([&] { w.on_complete([](pg_status_t, std::string_view) {}); }),
                PG_ERR_INVALID_ARGUMENT);
    }  // the Work is gone; its callback still runs
    ASSERT_EQ(outcome.wait_for(20s), std::future_status::ready);
    EXPECT_EQ(outcome.get(), PG_OK);
    EXPECT_EQ(v[3], 3.0f);
    EXPECT_EQ(calls, 1);
  });
}

TEST(WrapperWork, AnEmptyWorkThrows) {
  procgroup::Work w;
  EXPECT_FALSE(w.valid());
  EXPECT_EQ(status_of([&] { w.wait(); }), PG_ERR_INVALID_ARGUMENT);
}

}  // namespace
