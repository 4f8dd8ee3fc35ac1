// Ranks that pass the same sizes but other arguments: reduce op, dtype, root, or a
// send/recv dtype. Without PROCGROUP_DEBUG the ucx plugin compares the fingerprint every
// message carries (op_fingerprint.h): every rank fails with PG_ERR_MISMATCH saying what
// differs, at once, and none returns PG_OK with another rank's data mixed in. A broadcast
// or scatter root learns it from the confirmations it waits for.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "ucx_test_support.h"

namespace procgroup::ucx_test {
namespace {

using Clock = std::chrono::steady_clock;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Runs o on this rank and expects PG_ERR_MISMATCH whose message has `says` (the words of
// the rank that found it: the other may learn it from its notice), found quickly; then the
// group is broken: the next collective fails too, at once.
void expect_mismatch(RankEnv& env, const pg_backend_op_t& o, const std::string& says) {
  std::string error;
  const auto t0 = Clock::now();
  env.expect_status(env.run(o, &error), PG_ERR_MISMATCH, "rank " + std::to_string(env.rank));
  env.expect(contains(error, says), "the message says '" + says + "': " + error);
  env.expect(seconds_since(t0) < 5, "found at once, not by a timeout");
  const pg_status_t next = env.run(make_op(PG_OP_BARRIER, absent(), absent()), &error);
  env.expect(next != PG_OK, "a barrier after the mismatch must fail");
}

// Recursive doubling (received into scratch) and the pipelined ring (reduced as UCX
// unpacks: the check comes after the kernel ran, but the call still fails).
class ReduceOpDiffers : public ::testing::TestWithParam<const char*> {};

TEST_P(ReduceOpDiffers, EveryRankFails) {
  WorldOptions options;
  options.env = {{"PROCGROUP_UCX_ALLREDUCE", GetParam()}, {"PROCGROUP_UCX_CHUNK_BYTES", "4096"}};
  run_world(2, options, [](RankEnv& env) {
    std::vector<float> x(1 << 12, static_cast<float>(env.rank + 1));  // 16 KiB: fits a slot
    OpArgs a;
    a.reduce_op = env.rank == 0 ? PG_REDUCE_SUM : PG_REDUCE_MAX;
    pg_buffer_t b = cpu(x.data(), x.size(), PG_DTYPE_F32);
    expect_mismatch(env, make_op(PG_OP_ALLREDUCE, b, b, a), "reduce op");
  });
}

INSTANTIATE_TEST_SUITE_P(UcxArguments, ReduceOpDiffers,
                         ::testing::Values("rd", "ring", "shm", "shm_small"));

TEST(UcxArguments, DtypeDiffersAtTheSameSize) {
  run_world(2, {}, [](RankEnv& env) {
    float f[3] = {1, 2, 3};
    int32_t i[3] = {1, 2, 3};
    pg_buffer_t b = env.rank == 0 ? cpu(f, 3, PG_DTYPE_F32) : cpu(i, 3, PG_DTYPE_I32);
    // Whichever rank found it first says so; the other may fail by its notice.
    expect_mismatch(env, make_op(PG_OP_ALLREDUCE, b, b), "dtype ");
  });
}

// Each rank thinks it is the root: both send, so each receives the other's data where it
// expected a confirmation. Broadcast (tree and chain) and scatter.
class RootDiffers : public ::testing::TestWithParam<const char*> {};

TEST_P(RootDiffers, EveryRankFails) {
  const std::string which = GetParam();
  WorldOptions options;
  if (which == "broadcast_chain") options.env = {{"PROCGROUP_UCX_BROADCAST", "chain"}};
  run_world(2, options, [which](RankEnv& env) {
    std::vector<float> data(8, static_cast<float>(env.rank + 1));
    OpArgs a;
    a.root = env.rank;
    std::vector<float> mine(4);
    pg_buffer_t all = cpu(data.data(), 8, PG_DTYPE_F32);
    const pg_backend_op_t o =
        which == "scatter" ? make_op(PG_OP_SCATTER, all, cpu(mine.data(), 4, PG_DTYPE_F32), a)
                           : make_op(PG_OP_BROADCAST, all, all, a);
    expect_mismatch(env, o, "different roots");
  });
}

INSTANTIATE_TEST_SUITE_P(UcxArguments, RootDiffers,
                         ::testing::Values("broadcast", "broadcast_chain", "scatter"));

// A receiver of another count fails; the root, whose data only leaves it, fails as well.
TEST(UcxArguments, BroadcastCountDiffersFailsTheRootToo) {
  run_world(2, {}, [](RankEnv& env) {
    const uint64_t n = env.rank == 1 ? 12 : 8;
    std::vector<float> data(n, 1.0f);
    pg_buffer_t b = cpu(data.data(), n, PG_DTYPE_F32);
    expect_mismatch(env, make_op(PG_OP_BROADCAST, b, b), "different counts");
  });
}

// Same byte count, other dtype: the recv fails and both ranks stay in step.
TEST(UcxArguments, SendRecvDtypeDiffers) {
  run_world(2, {}, [](RankEnv& env) {
    float f[4] = {1, 2, 3, 4};
    int32_t i[4] = {-1, -1, -1, -1};
    OpArgs a;
    a.peer = 1 - env.rank;
    a.tag = 9;
    std::string error;
    if (env.rank == 0) {
      env.expect_status(env.run(make_op(PG_OP_SEND, cpu(f, 4, PG_DTYPE_F32), absent(), a), &error),
                        PG_OK, "the send");
    } else {
      const pg_status_t st =
          env.run(make_op(PG_OP_RECV, absent(), cpu(i, 4, PG_DTYPE_I32), a), &error);
      env.expect_status(st, PG_ERR_MISMATCH, "a recv of another dtype");
      env.expect(contains(error, "dtype f32 where this rank passed i32"), error);
    }
    int32_t x = env.rank + 1;
    pg_buffer_t one = cpu(&x, 1, PG_DTYPE_I32);
    env.expect_status(env.run(make_op(PG_OP_ALLREDUCE, one, one), &error), PG_OK,
                      "an allreduce after it: " + error);
    env.expect(x == 3, "its result");
  });
}

}  // namespace
}  // namespace procgroup::ucx_test
