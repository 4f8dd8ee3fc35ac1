// Negotiation, send/recv, many operations in flight, and argument errors of the gloo
// plugin, with ranks as real processes.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "gloo_test_support.h"
#include "gloo_typed_buffer.h"

namespace procgroup::gloo_test {
namespace {

TEST(GlooNegotiate, AnnouncesEveryOpDtypeAndReduceOp) {
  Plugin plugin;
  ASSERT_EQ(plugin.status(), PG_OK) << plugin.error();
  const auto& info = plugin.info();
  EXPECT_EQ(info.version, 1u);
  EXPECT_STREQ(info.name, "gloo");
  EXPECT_NE(std::string(info.description).find("Gloo 0."), std::string::npos) << info.description;
  EXPECT_EQ(info.native_ops, (1u << PG_OP_COUNT_) - 1);
  EXPECT_EQ(info.native_dtypes, ((1u << PG_DTYPE_COUNT_) - 1) & ~1u);
  EXPECT_EQ(info.native_reduce_ops, (1u << PG_REDUCE_COUNT_) - 1);
  EXPECT_EQ(info.devices, 1u << PG_DEVICE_CPU);
  ASSERT_NE(info.ops, nullptr);
  EXPECT_GE(info.ops->struct_size, PG_BACKEND_OPS_V1_SIZE);
  const pg_backend_ops_t& ops = *info.ops;
  for (auto fn : {ops.allreduce, ops.broadcast, ops.reduce, ops.allgather, ops.reduce_scatter,
                  ops.gather, ops.scatter, ops.alltoall, ops.barrier, ops.send, ops.recv}) {
    EXPECT_NE(fn, nullptr);
  }
}

TEST(GlooNegotiate, RejectsAVersionRangeWithoutOne) {
  Plugin plugin(2, 5);
  EXPECT_EQ(plugin.status(), PG_ERR_ABI_MISMATCH);
  EXPECT_NE(plugin.error().find("2..5"), std::string::npos) << plugin.error();
}

class GlooSendRecv : public ::testing::TestWithParam<int> {};

// Sends to the right neighbour, receives from the left, in a different tag order than
// the sends: matching is by (peer, tag), in issue order for a repeated tag.
TEST_P(GlooSendRecv, MatchesByTagInIssueOrder) {
  run_world(GetParam(), {}, [](RankEnv& r) {
    const int right = (r.rank + 1) % r.size, left = (r.rank + r.size - 1) % r.size;
    const uint64_t kCoreTag = (uint64_t{1} << 62) + 3;
    struct Msg {
      uint64_t tag;
      size_t n;
      pg_dtype_t dt;
      double base;
    };
    const std::vector<Msg> sends = {
        {5, 7, PG_DTYPE_F32, 1}, {7, 4099, PG_DTYPE_I32, 2},      {5, 7, PG_DTYPE_F32, 3},
        {0, 0, PG_DTYPE_F32, 4}, {kCoreTag, 1, PG_DTYPE_BF16, 5}, {11, 1 << 20, PG_DTYPE_F32, 6}};
    const std::vector<size_t> recv_order = {1, 0, 5, 2, 4, 3};  // indexes into sends
    auto value = [](int rank, const Msg& m, size_t i) {
      return static_cast<double>(rank * 10 + int(m.base)) + static_cast<double>(i % 64);
    };
    std::vector<TypedBuffer> out, in;
    std::vector<Work> works;
    for (const Msg& m : sends) {
      out.emplace_back(m.dt, m.n);
      for (size_t i = 0; i < m.n; ++i) out.back().set(i, value(r.rank, m, i));
    }
    for (size_t k : recv_order) in.emplace_back(sends[k].dt, sends[k].n);
    for (size_t k = 0; k < sends.size(); ++k) {
      OpArgs a;
      a.peer = right;
      a.tag = sends[k].tag;
      a.timeout_ms = INT64_MAX / 2;  // what the core passes when it has no deadline
      works.push_back(r.start(make_op(PG_OP_SEND, out[k].buffer(), absent(), a)));
    }
    for (size_t j = 0; j < recv_order.size(); ++j) {
      OpArgs a;
      a.peer = left;
      a.tag = sends[recv_order[j]].tag;
      works.push_back(r.start(make_op(PG_OP_RECV, absent(), in[j].buffer(), a)));
    }
    for (size_t w = works.size(); w-- > 0;) {  // waits in reverse issue order
      const pg_status_t st = works[w].wait();
      r.expect_status(st, PG_OK, "p2p work " + std::to_string(w) + " " + works[w].error());
    }
    for (size_t j = 0; j < recv_order.size(); ++j) {
      const Msg& m = sends[recv_order[j]];
      for (size_t i = 0; i < m.n; ++i) {
        if (in[j].get(i) != value(left, m, i)) {
          r.expect(false, "recv tag " + std::to_string(m.tag) + " element " + std::to_string(i) +
                              " is " + std::to_string(in[j].get(i)));
          break;
        }
      }
    }
    // Self and out-of-range peers are refused when issued.
    float x = 0;
    OpArgs self;
    self.peer = r.rank;
    Work w = r.start(make_op(PG_OP_SEND, cpu(&x, 1, PG_DTYPE_F32), absent(), self));
    r.expect_status(w.submit_status(), PG_ERR_UNSUPPORTED, "send to self: " + w.error());
    OpArgs far;
    far.peer = r.size;
    w = r.start(make_op(PG_OP_RECV, absent(), cpu(&x, 1, PG_DTYPE_F32), far));
    r.expect_status(w.submit_status(), PG_ERR_INVALID_ARGUMENT, "recv from rank size");
    r.expect(w.error().find("peer") != std::string::npos, "message names the peer: " + w.error());
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSize, GlooSendRecv, ::testing::Values(2, 3, 4));

class GlooInFlight : public ::testing::TestWithParam<int> {};

// Forty operations issued before any wait, waited in reverse order, some released while
// pending; plus a recv that cannot complete yet reports PG_PENDING on a short wait.
TEST_P(GlooInFlight, ManyOperationsOutOfOrderWaits) {
  run_world(GetParam(), {}, [](RankEnv& r) {
    const int kOps = 40;
    const size_t n = 1000;
    const int right = (r.rank + 1) % r.size, left = (r.rank + r.size - 1) % r.size;
    std::vector<TypedBuffer> bufs;
    for (int k = 0; k < kOps; ++k) bufs.emplace_back(PG_DTYPE_F32, n);
    std::vector<TypedBuffer> sent;
    sent.reserve(kOps);  // sends read these while in flight: no reallocation
    std::vector<Work> works;
    for (int k = 0; k < kOps; ++k) {
      TypedBuffer& b = bufs[k];
      for (size_t i = 0; i < n; ++i) b.set(i, r.rank + k + static_cast<double>(i % 10));
      OpArgs a;
      pg_backend_op_t o;
      switch (k % 3) {
        case 0: o = make_op(PG_OP_ALLREDUCE, b.buffer(), b.buffer()); break;
        case 1:
          a.root = k % r.size;
          o = make_op(PG_OP_BROADCAST, b.buffer(), b.buffer(), a);
          break;
        default:  // one send and one recv per slot: send ours right, receive from the left
          a.peer = right;
          a.tag = static_cast<uint64_t>(k);
          sent.emplace_back(b);
          works.push_back(r.start(make_op(PG_OP_SEND, sent.back().buffer(), absent(), a)));
          a.peer = left;
          o = make_op(PG_OP_RECV, absent(), b.buffer(), a);
          break;
      }
      works.push_back(r.start(o));
      if (k == 3 || k == 4) works.back().release();  // pending when released
    }
    for (size_t w = works.size(); w-- > 0;) {
      r.expect_status(works[w].wait(), PG_OK,
                      "in-flight work " + std::to_string(w) + " " + works[w].error());
    }
    r.expect_status(works.front().test(), PG_OK, "work_test after completion");
    for (int k = 0; k < kOps; ++k) {
      double sum_ranks = 0;
      for (int q = 0; q < r.size; ++q) sum_ranks += q;
      for (size_t i = 0; i < n; ++i) {
        const double base = static_cast<double>(k) + static_cast<double>(i % 10);
        const double want = k % 3 == 0   ? sum_ranks + r.size * base
                            : k % 3 == 1 ? (k % r.size) + base
                                         : left + base;
        if (bufs[k].get(i) != want) {
          r.expect(false, "op " + std::to_string(k) + " element " + std::to_string(i) + " is " +
                              std::to_string(bufs[k].get(i)) + ", want " + std::to_string(want));
          break;
        }
      }
    }
    // A recv whose send comes only after a flag: the short wait must say PG_PENDING.
    float x = 0, y = 42;
    OpArgs a;
    a.tag = 99;
    if (r.rank == 0) {
      a.peer = 1;
      Work w = r.start(make_op(PG_OP_RECV, absent(), cpu(&x, 1, PG_DTYPE_F32), a));
      r.expect_status(w.wait(50), PG_PENDING, "recv before its send");
      r.expect_status(w.test(), PG_PENDING, "test before its send");
      r.store->put("go", "1");
      r.expect_status(w.wait(), PG_OK, "recv after its send " + w.error());
      r.expect(x == 42, "recv got " + std::to_string(x));
    } else if (r.rank == 1) {
      std::string v;
      r.expect(r.store->fetch("go", 10000, &v), "flag");
      a.peer = 0;
      r.expect_status(r.run(make_op(PG_OP_SEND, cpu(&y, 1, PG_DTYPE_F32), absent(), a)), PG_OK,
                      "late send");
    }
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSize, GlooInFlight, ::testing::Values(2, 3, 4));

TEST(GlooErrors, CudaBuffersAreUnsupportedWithAHint) {
  run_world(2, {}, [](RankEnv& r) {
    float x[4] = {1, 2, 3, 4};
    pg_buffer_t gpu = cpu(x, 4, PG_DTYPE_F32);
    gpu.device_type = PG_DEVICE_CUDA;
    for (pg_op_t kind : {PG_OP_ALLREDUCE, PG_OP_BROADCAST, PG_OP_SEND}) {
      OpArgs a;
      a.peer = 1 - r.rank;
      Work w = r.start(make_op(kind, gpu, kind == PG_OP_SEND ? absent() : gpu, a));
      r.expect_status(w.submit_status(), PG_ERR_UNSUPPORTED, "CUDA buffer");
      r.expect(w.error().find("gloo backend handles CPU buffers only; use "
                              "PROCGROUP_BACKEND=nccl for CUDA buffers") != std::string::npos,
               "hint in message: " + w.error());
    }
    // The group is still healthy.
    pg_buffer_t b = cpu(x, 4, PG_DTYPE_F32);
    r.expect_status(r.run(make_op(PG_OP_ALLREDUCE, b, b)), PG_OK, "allreduce after refusals");
    r.expect(x[3] == 8, "allreduce result");
  });
}

TEST(GlooErrors, BadArgumentsAreRefusedWithAMessage) {
  run_world(2, {}, [](RankEnv& r) {
    float x[6] = {};
    auto refused = [&](pg_backend_op_t o, const std::string& needle) {
      Work w = r.start(o);
      r.expect_status(w.submit_status(), PG_ERR_INVALID_ARGUMENT, needle);
      r.expect(w.error().find(needle) != std::string::npos,
               "message '" + w.error() + "' mentions '" + needle + "'");
    };
    OpArgs a;
    refused(make_op(PG_OP_ALLGATHER, cpu(x, 2, PG_DTYPE_F32), cpu(x + 2, 3, PG_DTYPE_F32)),
            "not a multiple");
    refused(make_op(PG_OP_ALLREDUCE, cpu(x, 2, PG_DTYPE_F32), cpu(x + 2, 3, PG_DTYPE_F32)),
            "count");
    refused(make_op(PG_OP_ALLREDUCE, cpu(x, 2, PG_DTYPE_INVALID), cpu(x, 2, PG_DTYPE_INVALID)),
            "dtype");
    refused(make_op(PG_OP_ALLREDUCE, cpu(x, 2, PG_DTYPE_F32), cpu(x + 2, 2, PG_DTYPE_I32)),
            "dtype");
    a.root = 2;
    refused(make_op(PG_OP_BROADCAST, cpu(x, 2, PG_DTYPE_F32), cpu(x, 2, PG_DTYPE_F32), a), "root");
    a.root = 0;
    a.reduce_op = 9;
    refused(make_op(PG_OP_ALLREDUCE, cpu(x, 2, PG_DTYPE_F32), cpu(x, 2, PG_DTYPE_F32), a),
            "reduce op");
    pg_backend_op_t small = make_op(PG_OP_BARRIER, absent(), absent());
    small.struct_size = 8;
    refused(small, "struct_size");
    take_error();
    const pg_status_t st = r.ops->barrier(r.group, &small, nullptr);
    r.expect_status(st, PG_ERR_INVALID_ARGUMENT, "NULL work pointer");
    r.expect(!take_error().empty(), "set_error before returning an error");
    // Both ranks refused the same operations without communicating: still in step.
    r.expect_status(r.run(make_op(PG_OP_BARRIER, absent(), absent())), PG_OK, "barrier after");
  });
}

}  // namespace
}  // namespace procgroup::gloo_test
