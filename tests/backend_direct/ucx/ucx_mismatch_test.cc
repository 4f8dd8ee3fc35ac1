// Ranks that pass different counts to the same operation. Every receive of the ucx plugin
// checks the size of what arrived against what it expected, through every algorithm, also
// when the message was already waiting when the receive was posted (UCX then completes it
// inside ucp_tag_recv_nbx): the rank that receives the wrong size fails with
// PG_ERR_MISMATCH naming op, seq, peer and both sizes, never writes past its buffer, and
// no rank hangs. A send/recv mismatch fails only the recv; the group stays usable.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <tuple>
#include <vector>

#include "ucx_test_support.h"
#include "ucx_values.h"

namespace procgroup::ucx_test {
namespace {

using Clock = std::chrono::steady_clock;
using Env = std::vector<std::pair<std::string, std::string>>;

constexpr int kRanks = 3;
constexpr int kVictim = 1;  // passes 1.5x the others' count
constexpr uint64_t kCount = 1000;
constexpr float kCanary = -7.0f;
constexpr int kLateUs = 300 * 1000;  // long enough for the others' messages to be waiting

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

struct Algo {
  const char* name;
  pg_op_t op;
  Env env;
  int must = kVictim;  // a rank sure to receive a block of the other size
};

// Chunks of 48 bytes do not divide either rank's total, so the pipelines' last chunks
// differ in size (equal chunk counts are not required for the check to fire).
const Env kPipelines = {{"PROCGROUP_UCX_CHUNK_BYTES", "48"}, {"PROCGROUP_UCX_WINDOW", "2"}};

Env with(Env base, const char* key, const char* value) {
  base.emplace_back(key, value);
  return base;
}

const Algo kAlgos[] = {
    {"AllreduceRecursiveDoubling", PG_OP_ALLREDUCE, {{"PROCGROUP_UCX_ALLREDUCE", "rd"}}},
    {"AllreduceRabenseifner", PG_OP_ALLREDUCE, {{"PROCGROUP_UCX_ALLREDUCE", "rabenseifner"}}},
    {"AllreduceRing", PG_OP_ALLREDUCE, with(kPipelines, "PROCGROUP_UCX_ALLREDUCE", "ring")},
    {"AllreduceShared",
     PG_OP_ALLREDUCE,
     {{"PROCGROUP_UCX_ALLREDUCE", "shm"}, {"PROCGROUP_UCX_SHM_CHUNK_BYTES", "48"}}},
    {"AllreduceSharedSmall", PG_OP_ALLREDUCE, {{"PROCGROUP_UCX_ALLREDUCE", "shm_small"}}},
    {"BroadcastBinomial", PG_OP_BROADCAST, {{"PROCGROUP_UCX_BROADCAST", "binomial"}}},
    {"BroadcastChain", PG_OP_BROADCAST, with(kPipelines, "PROCGROUP_UCX_BROADCAST", "chain")},
    {"ReduceBinomial", PG_OP_REDUCE, {{"PROCGROUP_UCX_REDUCE", "binomial"}}, 0},  // 1 is a leaf
    {"ReduceChain", PG_OP_REDUCE, with(kPipelines, "PROCGROUP_UCX_REDUCE", "chain")},
    {"AllgatherBruck", PG_OP_ALLGATHER, {{"PROCGROUP_UCX_ALLGATHER", "bruck"}}},
    {"AllgatherRing", PG_OP_ALLGATHER, with(kPipelines, "PROCGROUP_UCX_ALLGATHER", "ring")},
    {"ReduceScatterRing", PG_OP_REDUCE_SCATTER, kPipelines},
    {"Gather", PG_OP_GATHER, {}, 0},
    {"Scatter", PG_OP_SCATTER, {}},
    {"Alltoall", PG_OP_ALLTOALL, {}},
};

// Buffers for one rank's call with n elements per block, canaries after each.
struct Call {
  std::vector<float> in, out;
  size_t in_n = 0, out_n = 0;
  pg_backend_op_t op{};

  Call(pg_op_t kind, int rank, uint64_t n) {
    const bool root = rank == 0;
    switch (kind) {
      case PG_OP_ALLREDUCE:
      case PG_OP_BROADCAST: in_n = out_n = n; break;
      case PG_OP_REDUCE: in_n = n, out_n = root ? n : 0; break;
      case PG_OP_ALLGATHER: in_n = n, out_n = n * kRanks; break;
      case PG_OP_REDUCE_SCATTER: in_n = n * kRanks, out_n = n; break;
      case PG_OP_GATHER: in_n = n, out_n = root ? n * kRanks : 0; break;
      case PG_OP_SCATTER: in_n = root ? n * kRanks : 0, out_n = n; break;
      default: in_n = out_n = n * kRanks; break;  // alltoall
    }
    in.assign(in_n + 16, 1.0f);
    out.assign(out_n + 16, kCanary);
    for (size_t i = in_n; i < in.size(); ++i) in[i] = kCanary;
    const bool same = kind == PG_OP_ALLREDUCE || kind == PG_OP_BROADCAST;
    pg_buffer_t bin = in_n > 0 ? cpu(in.data(), in_n, PG_DTYPE_F32) : absent();
    pg_buffer_t bout = out_n > 0 ? cpu(out.data(), out_n, PG_DTYPE_F32) : absent();
    op = make_op(kind, bin, same ? bin : bout);
  }
  bool canaries_intact() const {
    for (size_t i = in_n; i < in.size(); ++i)
      if (in[i] != kCanary) return false;
    for (size_t i = out_n; i < out.size(); ++i)
      if (out[i] != kCanary) return false;
    return true;
  }
};

// The victim's receives complete at once (its peers' messages already wait), or theirs do.
class CountMismatch : public ::testing::TestWithParam<std::tuple<Algo, bool>> {};

TEST_P(CountMismatch, FailsTheReceiverNamingBothSizesAndNobodyHangs) {
  const auto& [algo, victim_late] = GetParam();
  WorldOptions options;
  options.env = algo.env;
  options.timeout_ms = 20000;
  const pg_op_t kind = algo.op;
  run_world(kRanks, options, [kind, must = algo.must, late = victim_late](RankEnv& env) {
    Call call(kind, env.rank, env.rank == kVictim ? kCount * 3 / 2 : kCount);
    if ((env.rank == kVictim) == late) usleep(kLateUs);
    const auto t0 = Clock::now();
    std::string error;
    const pg_status_t st = env.run(call.op, &error);
    const double took = seconds_since(t0);
    env.expect(took < 5, "ended after " + std::to_string(took) + " s, not at the timeout");
    env.expect(call.canaries_intact(), "wrote past a buffer");
    // The others finish, or fail once the group broke (how depends on the race between
    // the notice and their own next message); none hangs.
    if (env.rank == must) env.expect_status(st, PG_ERR_MISMATCH, "the rank that got another size");
    if (st == PG_ERR_MISMATCH) {
      const std::string label = std::string(op_label(kind)) + " #1";
      env.expect(contains(error, label) && contains(error, "recv of ") &&
                     contains(error, " bytes from rank ") && contains(error, " sent "),
                 "names op, seq, peer and sizes: " + error);
    }
    // The ranks are out of step: the group is broken everywhere, and says so at once.
    const auto t1 = Clock::now();
    const pg_status_t next = env.run(make_op(PG_OP_BARRIER, absent(), absent()), &error);
    env.expect(next != PG_OK, "a barrier after the mismatch must fail");
    env.expect(seconds_since(t1) < 5,
               "the barrier after it took " + std::to_string(seconds_since(t1)) + " s");
  });
}

std::string mismatch_name(const ::testing::TestParamInfo<std::tuple<Algo, bool>>& info) {
  return std::string(std::get<0>(info.param).name) +
         (std::get<1>(info.param) ? "_VictimLate" : "_OthersLate");
}

INSTANTIATE_TEST_SUITE_P(UcxMismatch, CountMismatch,
                         ::testing::Combine(::testing::ValuesIn(kAlgos), ::testing::Bool()),
                         mismatch_name);

// Rank 0 sends n floats; rank 1 receives half or twice that, posted before or after the
// message arrived; eager (small) and rendezvous (1 MiB) messages.
class RecvMismatch : public ::testing::TestWithParam<std::tuple<uint64_t, bool, bool>> {};

TEST_P(RecvMismatch, FailsOnlyTheRecvAndTheGroupStaysUsable) {
  const auto& [n, larger, late] = GetParam();
  run_world(2, {}, [n, larger, late](RankEnv& env) {
    const uint64_t mine = env.rank == 0 ? n : (larger ? n * 2 : n / 2);
    std::vector<float> data(mine + 16, env.rank == 0 ? 3.0f : kCanary);
    OpArgs a;
    a.peer = 1 - env.rank;
    a.tag = 5;
    pg_buffer_t b = cpu(data.data(), mine, PG_DTYPE_F32);
    std::string error;
    if (env.rank == 0) {
      env.expect_status(env.run(make_op(PG_OP_SEND, b, absent(), a), &error), PG_OK, "the send");
    } else {
      if (late) usleep(kLateUs);
      const pg_status_t st = env.run(make_op(PG_OP_RECV, absent(), b, a), &error);
      env.expect_status(st, PG_ERR_MISMATCH, "a recv of another size");
      const std::string sent = "rank 0 sent " + std::to_string(n * 4) + " bytes";
      const std::string want = "recv of " + std::to_string(mine * 4) + " bytes from rank 0";
      env.expect(contains(error, "recv #1") && contains(error, sent) && contains(error, want),
                 "names the recv, both sizes and the sender: " + error);
      env.expect(data[mine] == kCanary, "wrote past the buffer");
    }
    int32_t x = env.rank + 1;
    pg_buffer_t one = cpu(&x, 1, PG_DTYPE_I32);
    env.expect_status(env.run(make_op(PG_OP_ALLREDUCE, one, one), &error), PG_OK,
                      "an allreduce after it: " + error);
    env.expect(x == 3, "its result");
  });
}

std::string recv_name(const ::testing::TestParamInfo<std::tuple<uint64_t, bool, bool>>& info) {
  return "n" + std::to_string(std::get<0>(info.param)) +
         (std::get<1>(info.param) ? "_RecvLarger" : "_RecvSmaller") +
         (std::get<2>(info.param) ? "_PostedLate" : "_PostedFirst");
}

INSTANTIATE_TEST_SUITE_P(UcxMismatch, RecvMismatch,
                         ::testing::Combine(::testing::Values(uint64_t{1000}, uint64_t{1} << 18),
                                            ::testing::Bool(), ::testing::Bool()),
                         recv_name);

}  // namespace
}  // namespace procgroup::ucx_test
