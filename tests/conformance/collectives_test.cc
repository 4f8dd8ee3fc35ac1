// Every collective, dtype, reduce op, root, size and in-place form, through libprocgroup,
// on world sizes 1-5. "loopback" runs them natively in the backend; "loopback_p2p" offers
// only send/recv, so the same list exercises the core's fallback algorithms.
#include <gtest/gtest.h>

#include <memory>
#include <tuple>

#include "collective_check.h"
#include "reference.h"
#include "thread_ranks.h"

namespace pgtest {
namespace {

using Param = std::tuple<std::string, int>;

class Collectives : public ::testing::TestWithParam<Param> {
 protected:
  const std::string& backend() const { return std::get<0>(GetParam()); }
  int world() const { return std::get<1>(GetParam()); }

  // Runs every case on every rank; records failures per rank (first few only).
  void run_all(const std::vector<CollectiveCase>& cases) {
    run_thread_ranks(backend(), world(), [&](pg_group_t g, int rank) {
      int failures = 0;
      for (const auto& c : cases) {
        std::string error = run_case(g, rank, world(), c);
        if (!error.empty() && ++failures <= 5) ADD_FAILURE() << error;
      }
    });
  }
};

std::vector<CollectiveCase> cases_for(pg_op_t op, int world,
                                      std::vector<uint64_t> sizes = {0, 1, 7, 1027}) {
  const bool reducing =
      op == PG_OP_ALLREDUCE || op == PG_OP_REDUCE || op == PG_OP_REDUCE_SCATTER;
  const bool rooted = op == PG_OP_BROADCAST || op == PG_OP_REDUCE || op == PG_OP_GATHER ||
                      op == PG_OP_SCATTER;
  std::vector<CollectiveCase> cases;
  for (pg_dtype_t dtype : all_dtypes())
    for (pg_reduce_op_t redop : reducing ? all_reduce_ops() : std::vector<pg_reduce_op_t>{PG_REDUCE_SUM})
      for (uint64_t n : sizes)
        for (int root = 0; root < (rooted ? world : 1); ++root)
          for (bool in_place : {false, true})
            cases.push_back({op, dtype, redop, n, root, in_place});
  return cases;
}

TEST_P(Collectives, Allreduce) { run_all(cases_for(PG_OP_ALLREDUCE, world())); }
TEST_P(Collectives, Broadcast) { run_all(cases_for(PG_OP_BROADCAST, world())); }
TEST_P(Collectives, Reduce) { run_all(cases_for(PG_OP_REDUCE, world(), {0, 1, 7, 130})); }
TEST_P(Collectives, Allgather) { run_all(cases_for(PG_OP_ALLGATHER, world())); }
TEST_P(Collectives, ReduceScatter) { run_all(cases_for(PG_OP_REDUCE_SCATTER, world())); }
TEST_P(Collectives, Gather) { run_all(cases_for(PG_OP_GATHER, world())); }
TEST_P(Collectives, Scatter) { run_all(cases_for(PG_OP_SCATTER, world())); }
TEST_P(Collectives, Alltoall) { run_all(cases_for(PG_OP_ALLTOALL, world())); }

// Large enough for the ring path of the fallback allreduce and uneven blocks.
TEST_P(Collectives, LargeAllreduceAndReduceScatter) {
  std::vector<CollectiveCase> cases;
  for (pg_reduce_op_t redop : {PG_REDUCE_SUM, PG_REDUCE_AVG, PG_REDUCE_MAX}) {
    cases.push_back({PG_OP_ALLREDUCE, PG_DTYPE_F32, redop, (1u << 20) + 3, 0, false});
    cases.push_back({PG_OP_ALLREDUCE, PG_DTYPE_BF16, redop, (1u << 18) + 1, 0, true});
    cases.push_back({PG_OP_REDUCE_SCATTER, PG_DTYPE_F32, redop, (1u << 16) + 5, 0, false});
  }
  run_all(cases);
}

TEST_P(Collectives, BarrierAndSendRecvRing) {
  run_thread_ranks(backend(), world(), [&](pg_group_t g, int rank) {
    ASSERT_EQ(pg_barrier(g, nullptr, nullptr), PG_OK) << pg_last_error();
    // Each rank sends its rank to the next and receives from the previous, tag = rank.
    int next = (rank + 1) % world(), prev = (rank + world() - 1) % world();
    int32_t mine[3] = {rank, rank * 10, rank * 100}, got[3] = {-1, -1, -1};
    pg_buffer_t sb = pg_buffer_cpu(mine, 3, PG_DTYPE_I32);
    pg_buffer_t rb = pg_buffer_cpu(got, 3, PG_DTYPE_I32);
    pg_op_options_t so = PG_OP_OPTIONS_INIT, ro = PG_OP_OPTIONS_INIT;
    so.peer = next;
    so.tag = rank;
    ro.peer = prev;
    ro.tag = prev;
    pg_work_t rw = nullptr, sw = nullptr;
    ASSERT_EQ(pg_recv(g, &rb, &ro, &rw), PG_OK) << pg_last_error();
    ASSERT_EQ(pg_send(g, &sb, &so, &sw), PG_OK) << pg_last_error();
    EXPECT_EQ(pg_work_wait(rw, -1), PG_OK) << pg_last_error();
    EXPECT_EQ(pg_work_wait(sw, -1), PG_OK) << pg_last_error();
    pg_work_release(rw);
    pg_work_release(sw);
    EXPECT_EQ(got[0], prev);
    EXPECT_EQ(got[2], prev * 100);
    ASSERT_EQ(pg_barrier(g, nullptr, nullptr), PG_OK) << pg_last_error();
  });
}

// Many operations in flight, waited in reverse order.
TEST_P(Collectives, ManyInFlightOutOfOrderWaits) {
  run_thread_ranks(backend(), world(), [&](pg_group_t g, int rank) {
    std::vector<std::unique_ptr<PendingCheck>> pending;
    for (int k = 0; k < 24; ++k) {
      CollectiveCase c{k % 3 == 0 ? PG_OP_ALLREDUCE : k % 3 == 1 ? PG_OP_ALLGATHER : PG_OP_BROADCAST,
                       k % 2 ? PG_DTYPE_F32 : PG_DTYPE_I64, PG_REDUCE_SUM,
                       static_cast<uint64_t>(1 + 97 * k), k % world(), false};
      std::string error;
      pending.emplace_back(start_case(g, rank, world(), c, &error));
      ASSERT_TRUE(pending.back()) << c.to_string() << ": " << error;
    }
    for (auto it = pending.rbegin(); it != pending.rend(); ++it) {
      EXPECT_EQ(pg_work_wait((*it)->work, -1), PG_OK) << pg_last_error();
      EXPECT_EQ((*it)->verify(), "");
      pg_work_release((*it)->work);
    }
  });
}

std::string name(const ::testing::TestParamInfo<Param>& info) {
  return std::get<0>(info.param) + "_world" + std::to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Loopback, Collectives,
                         ::testing::Combine(::testing::Values("loopback", "loopback_p2p"),
                                            ::testing::Values(1, 2, 3, 4, 5)),
                         name);

}  // namespace
}  // namespace pgtest
