// The ucx plugin's interface: negotiation and declared capabilities, argument errors and
// their messages, the user's UCX environment (UCX_TLS) honoured; the host's kernels, an
// older core's table included; and, without any communication, its tag layout and the
// fused receive.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "op_fingerprint.h"
#include "ucx_cases.h"
#include "ucx_recv_reduce.h"
#include "ucx_tags.h"
#include "ucx_test_support.h"
#include "ucx_values.h"

namespace procgroup::ucx_test {
namespace {

TEST(UcxInterface, NegotiatesVersionOneWithEverythingNative) {
  Plugin plugin;
  ASSERT_EQ(plugin.status(), PG_OK) << plugin.error();
  const pg_backend_negotiate_out_t& info = plugin.info();
  EXPECT_EQ(info.version, 1u);
  EXPECT_STREQ(info.name, "ucx");
  EXPECT_NE(std::string(info.description).find("UCX 1."), std::string::npos) << info.description;
  EXPECT_EQ(info.native_ops, (1u << PG_OP_COUNT_) - 1);
  for (pg_dtype_t d : all_dtypes()) EXPECT_TRUE(info.native_dtypes & (1u << d)) << d;
  for (pg_reduce_op_t op : all_reduce_ops()) EXPECT_TRUE(info.native_reduce_ops & (1u << op));
  EXPECT_EQ(info.devices, 1u << PG_DEVICE_CPU);
  EXPECT_GE(info.ops->struct_size, PG_BACKEND_OPS_V1_SIZE);
}

TEST(UcxInterface, RefusesOtherInterfaceVersions) {
  Plugin plugin(2, 3);
  EXPECT_EQ(plugin.status(), PG_ERR_ABI_MISMATCH);
  EXPECT_NE(plugin.error().find("2..3"), std::string::npos) << plugin.error();
}

TEST(UcxInterface, BadArgumentsAreRejectedWithMessages) {
  run_world(2, {}, [](RankEnv& env) {
    float x[4] = {}, y[4] = {};
    auto expect_error = [&](pg_backend_op_t o, pg_status_t want, const std::string& part) {
      Work w = env.start(o);
      env.expect_status(w.submit_status(), want, part);
      env.expect(w.error().find(part) != std::string::npos, "message: " + w.error());
    };
    OpArgs a;
    a.root = 2;
    expect_error(make_op(PG_OP_BROADCAST, cpu(x, 4, PG_DTYPE_F32), cpu(x, 4, PG_DTYPE_F32), a),
                 PG_ERR_INVALID_ARGUMENT, "root 2 is not a rank of this group (size 2)");
    a = OpArgs{};
    a.peer = 5;
    expect_error(make_op(PG_OP_SEND, cpu(x, 4, PG_DTYPE_F32), absent(), a), PG_ERR_INVALID_ARGUMENT,
                 "peer 5");
    expect_error(make_op(PG_OP_ALLGATHER, cpu(x, 1, PG_DTYPE_F32), cpu(x + 1, 3, PG_DTYPE_F32)),
                 PG_ERR_INVALID_ARGUMENT, "not a multiple of the group size 2");
    expect_error(make_op(PG_OP_ALLREDUCE, cpu(x, 4, PG_DTYPE_F32), cpu(y, 4, PG_DTYPE_I32)),
                 PG_ERR_INVALID_ARGUMENT, "differs from output dtype");
    expect_error(make_op(PG_OP_ALLREDUCE, cpu(x, 3, PG_DTYPE_F32), cpu(x + 1, 3, PG_DTYPE_F32)),
                 PG_ERR_INVALID_ARGUMENT, "overlap but are not this operation's in-place form");
    pg_buffer_t gpu = cpu(x, 4, PG_DTYPE_F32);
    gpu.device_type = PG_DEVICE_CUDA;
    expect_error(make_op(PG_OP_ALLREDUCE, gpu, gpu), PG_ERR_UNSUPPORTED, "CPU buffers only");
    // None of that broke the group.
    Pending p = start_case(env, Case{PG_OP_ALLREDUCE, PG_DTYPE_F32, PG_REDUCE_SUM, 9});
    env.expect(finish_case(env, p).empty(), "an allreduce after the rejected ones");
  });
}

// The user's UCX environment decides the transports: TCP only, or shared memory without the
// transports that report peer failures (the plugin then relies on its timeouts, and says so).
TEST(UcxInterface, HonoursUcxTls) {
  for (const char* tls : {"tcp", "posix,cma,self"}) {
    WorldOptions options;
    options.env = {{"UCX_TLS", tls}};
    run_world(2, options, [](RankEnv& env) {
      for (uint64_t n : {uint64_t{3}, uint64_t{1} << 20}) {
        Pending p = start_case(env, Case{PG_OP_ALLREDUCE, PG_DTYPE_F64, PG_REDUCE_MAX, n});
        const std::string bad = finish_case(env, p);
        env.expect(bad.empty(), bad);
      }
    });
  }
}

// Ranks whose shared-memory windows differ (here the chunk size; another plugin version's
// layout the same way) all go without them, say why, and still agree.
TEST(UcxInterface, RanksWhoseWindowsDifferAllGoWithout) {
  WorldOptions options;
  options.create_group = false;
  run_world(2, options, [](RankEnv& env) {
    setenv("PROCGROUP_UCX_SHM_CHUNK_BYTES", env.rank == 0 ? "4096" : "8192", 1);
    const pg_status_t st = create_group(*env.ops, *env.store, env.rank, 2, 20000, &env.group);
    env.expect_status(st, PG_OK, "group_create");
    if (st != PG_OK) return;
    for (uint64_t n : {uint64_t{3}, uint64_t{1} << 16}) {
      Pending p = start_case(env, Case{PG_OP_ALLREDUCE, PG_DTYPE_F32, PG_REDUCE_SUM, n});
      const std::string bad = finish_case(env, p);
      env.expect(bad.empty(), bad);
    }
    const std::string why = "no shared-memory windows: rank " + std::to_string(1 - env.rank) +
                            " uses chunks of " + (env.rank == 0 ? "8192" : "4096") + " bytes";
    bool said = false;
    for (const std::string& line : plugin_harness::logged())
      said = said || line.find(why) != std::string::npos;
    env.expect(said, "a DEBUG line says why there are no windows");
  });  // the harness destroys env.group
}

// Planned once: ucx acts on the plan the core sent (plugin_harness.h).
TEST(UcxInterface, TakesTheCoresPlan) { run_world(2, {}, plugin_harness::expect_plan_taken); }

// ---- No communication -------------------------------------------------------------------

TEST(UcxTags, FieldsDoNotOverlap) {
  using namespace ucx_backend::tags;  // NOLINT(google-build-using-namespace): the tag layout
  // The highest rank, with every other field full, keeps its own tag and the kind bits.
  const uint64_t top = collective(kMaxRanks - 1, ~uint64_t{0}, ~uint64_t{0}, 0xFFFF);
  EXPECT_NE(top & kCollectiveMatch,
            collective(kMaxRanks - 2, ~uint64_t{0}, ~uint64_t{0}, 0xFFFF) & kCollectiveMatch);
  EXPECT_EQ(top >> 62, kKindCollective);
  EXPECT_EQ(collective(3, 1, 2, 0) >> 62, kKindCollective);
  EXPECT_EQ(p2p(3, ~uint64_t{0}, 15) >> 62, kKindP2p);
  EXPECT_EQ(control(7) & kKindMask, kKindControl << 62);
  EXPECT_NE(collective(1, 5, 7, 0), collective(2, 5, 7, 0));
  EXPECT_NE(collective(1, 5, 7, 0), collective(1, 6, 7, 0));
  EXPECT_NE(collective(1, 5, 7, 0), collective(1, 5, 8, 0));
  EXPECT_NE(p2p(1, 7, 1), p2p(2, 7, 1));
  // The sender's arguments sit only in the bits receives do not match on.
  EXPECT_EQ(collective(1, 5, 7, 0), collective(1, 5, 7, 0xFFFF) & kCollectiveMatch);
  EXPECT_EQ(fingerprint_of(collective(1, ~uint64_t{0}, ~uint64_t{0}, 0x1234)), 0x1234);
  EXPECT_EQ(collective(1, 5, 7, 3) & kConfirmMatch, collective(1, 5, 9, 0) & kConfirmMatch);
  EXPECT_NE(collective(1, 5, 7, 3) & kConfirmMatch, collective(1, 6, 7, 3) & kConfirmMatch);
  EXPECT_EQ(p2p(1, 7, 1) & kP2pMatch, p2p(1, 7, 7) & kP2pMatch);
  EXPECT_EQ(p2p_dtype(p2p(1, ~uint64_t{0}, 7)), 7);
  EXPECT_NE(p2p(1, 7, 1) & kP2pMatch, p2p(1, 8, 1) & kP2pMatch);
}

TEST(UcxFingerprint, TellsApartWhatRanksMustPassAlike) {
  using ucx_backend::OpFingerprint;
  auto fp = [](pg_op_t op, pg_dtype_t d, uint64_t n, int root, pg_reduce_op_t r) {
    return OpFingerprint::collective(op, d, n, root, r).bits;
  };
  const uint16_t base = fp(PG_OP_ALLREDUCE, PG_DTYPE_F32, 3, 0, PG_REDUCE_SUM);
  EXPECT_NE(base, fp(PG_OP_ALLREDUCE, PG_DTYPE_F32, 3, 0, PG_REDUCE_MAX));
  EXPECT_NE(base, fp(PG_OP_ALLREDUCE, PG_DTYPE_I32, 3, 0, PG_REDUCE_SUM));
  EXPECT_NE(base, fp(PG_OP_BROADCAST, PG_DTYPE_F32, 3, 0, PG_REDUCE_SUM));
  // Fields an op does not use may differ between ranks.
  EXPECT_EQ(base, fp(PG_OP_ALLREDUCE, PG_DTYPE_F32, 3, 5, PG_REDUCE_SUM));
  EXPECT_EQ(fp(PG_OP_BROADCAST, PG_DTYPE_F32, 3, 1, PG_REDUCE_SUM),
            fp(PG_OP_BROADCAST, PG_DTYPE_F32, 3, 1, PG_REDUCE_MAX));
  // Roots that differ in their low 5 bits always differ.
  for (int a = 0; a < 32; ++a) {
    for (int b = a + 1; b < 32; ++b) {
      EXPECT_NE(fp(PG_OP_BROADCAST, PG_DTYPE_F32, 1000, a, PG_REDUCE_SUM),
                fp(PG_OP_BROADCAST, PG_DTYPE_F32, 1000, b, PG_REDUCE_SUM));
    }
  }
  const auto f = OpFingerprint{fp(PG_OP_REDUCE, PG_DTYPE_I64, 7, 2, PG_REDUCE_MAX)}.fields();
  EXPECT_EQ(f.op, PG_OP_REDUCE);
  EXPECT_EQ(f.dtype, PG_DTYPE_I64);
  EXPECT_EQ(f.reduce_op, PG_REDUCE_MAX);
}

TEST(UcxTags, FoldKeepsUserAndCoreTagsApart) {
  using ucx_backend::tags::fold_p2p;
  // User tags (< 2^30 through procgroup.h, < 2^35 in general) map to themselves.
  for (uint64_t t : {uint64_t{0}, uint64_t{7}, (uint64_t{1} << 30) - 1, (uint64_t{1} << 35) - 1}) {
    EXPECT_EQ(fold_p2p(t), t);
  }
  // The core's tags (2^62 + seq * 2^16 + step) stay distinct for 2^19 sequence numbers and
  // never meet a user tag.
  std::set<uint64_t> seen;
  for (uint64_t seq = 1; seq < 70000; seq += 997) {
    for (uint64_t step = 0; step < 65536; step += 4099) {
      const uint64_t folded = fold_p2p((uint64_t{1} << 62) + seq * 65536 + step);
      EXPECT_GE(folded, uint64_t{1} << 35);
      EXPECT_TRUE(seen.insert(folded).second) << seq << " " << step;
    }
  }
}

// The plugin reduces with the host's kernels: on an older core's table, which ends before
// reduce_to, through reduce, with the same results. AVG, and MIN of -0 and +0: which zero
// wins depends on the order of the operands, and every rank must end with the same bits.
// By recursive doubling (out == b included) and by the fused pipelined ring.
class OlderCoreKernels : public ::testing::TestWithParam<const char*> {};

TEST_P(OlderCoreKernels, SameResults) {
  static const pg_host_services_t older = host_with_core_kernels(false);
  static const plugin_harness::PluginUnderTest plugin = {PG_UCX_PATH, &older, "ucx_older", 100};
  WorldOptions options;
  options.env = {{"PROCGROUP_UCX_ALLREDUCE", GetParam()}, {"PROCGROUP_UCX_CHUNK_BYTES", "4096"}};
  plugin_harness::run_world(plugin, 2, options, [](RankEnv& env) {
    constexpr size_t kCount = 4003;  // 16012 bytes: fits a shared-memory slot
    std::vector<float> x(kCount), zeros(kCount, env.rank == 0 ? -0.0f : 0.0f);
    for (size_t i = 0; i < kCount; ++i) x[i] = static_cast<float>((i % 13) * (env.rank + 1));
    OpArgs avg;
    avg.reduce_op = PG_REDUCE_AVG;
    pg_buffer_t b = cpu(x.data(), kCount, PG_DTYPE_F32);
    env.expect_status(env.run(make_op(PG_OP_ALLREDUCE, b, b, avg)), PG_OK, "allreduce avg");
    bool right = true;
    for (size_t i = 0; i < kCount; ++i) right = right && x[i] == static_cast<float>(i % 13) * 1.5f;
    env.expect(right, "avg of 1x and 2x is 1.5x");
    OpArgs min;
    min.reduce_op = PG_REDUCE_MIN;
    pg_buffer_t z = cpu(zeros.data(), kCount, PG_DTYPE_F32);
    env.expect_status(env.run(make_op(PG_OP_ALLREDUCE, z, z, min)), PG_OK, "allreduce min");
    // Which zero wins depends on the algorithm; that both ranks hold the same bits does not.
    std::vector<float> both(2 * kCount);
    pg_buffer_t all = cpu(both.data(), both.size(), PG_DTYPE_F32);
    env.expect_status(env.run(make_op(PG_OP_ALLGATHER, z, all)), PG_OK, "allgather");
    // Bits, not values: +0 and -0 compare equal as floats.
    env.expect(std::memcmp(both.data(),
                           both.data() + kCount,  // NOLINT(bugprone-suspicious-memory-comparison)
                           kCount * sizeof(float)) == 0,
               "both ranks hold the same bits after min");
  });
}

INSTANTIATE_TEST_SUITE_P(UcxKernels, OlderCoreKernels,
                         ::testing::Values("rd", "ring", "shm", "shm_small"));

// UCX hands a fused receive its data in fragments of any size, at any byte offset and
// (for some protocols) in any order: elements cut between fragments must come out right.
TEST(UcxKernels, ReduceWhileReceivingAnyFragmentation) {
  const ucp_generic_dt_ops_t& ops = ucx_backend::reduce_datatype_ops();
  for (pg_dtype_t d : {PG_DTYPE_F64, PG_DTYPE_F32, PG_DTYPE_BF16, PG_DTYPE_I8}) {
    const uint64_t n = 5003, es = dtype_bytes(d);
    Typed mine(d, n), theirs(d, n), out(d, n);
    for (uint64_t i = 0; i < n; ++i) {
      mine.set(i, contribution(0, i, PG_REDUCE_SUM, d));
      theirs.set(i, contribution(1, i, PG_REDUCE_SUM, d));
    }
    for (bool shuffled : {false, true}) {
      out.fill(-7);
      ucx_backend::ReduceInto into{.dst = static_cast<std::byte*>(out.data()),
                                   .mine = static_cast<const std::byte*>(mine.data()),
                                   .es = es,
                                   .dtype = d,
                                   .op = PG_REDUCE_SUM,
                                   .bytes = n * es,
                                   .host = ucx_plugin().host,
                                   .failure = {},
                                   .split = {}};
      void* state = ops.start_unpack(nullptr, &into, n * es);
      ASSERT_EQ(ops.packed_size(state), n * es);
      // Fragments of 1..997 bytes, delivered in order or with every pair swapped.
      std::vector<std::pair<uint64_t, uint64_t>> fragments;
      for (uint64_t at = 0, k = 0; at < n * es; ++k) {
        const uint64_t len = std::min<uint64_t>(1 + (k * 389) % 997, n * es - at);
        fragments.emplace_back(at, len);
        at += len;
      }
      if (shuffled) {
        for (size_t k = 0; k + 1 < fragments.size(); k += 2)
          std::swap(fragments[k], fragments[k + 1]);
      }
      // A misaligned copy of the source, as a transport buffer would hold it.
      std::vector<std::byte> wire(n * es + 1);
      std::memcpy(wire.data() + 1, theirs.data(), n * es);
      for (const auto& [at, len] : fragments) {
        ASSERT_EQ(ops.unpack(state, at, wire.data() + 1 + at, len), UCS_OK);
      }
      ops.finish(state);
      EXPECT_TRUE(into.split.empty());
      for (uint64_t i = 0; i < n; ++i) {
        ASSERT_EQ(out.get(i), mine.get(i) + theirs.get(i)) << dtype_label(d) << " " << i;
      }
    }
  }
}

}  // namespace
}  // namespace procgroup::ucx_test
