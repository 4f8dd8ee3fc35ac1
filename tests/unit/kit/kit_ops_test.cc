// The backend kit's tables and planning (backend_kit/dtype.hpp, op_table.hpp, ops.hpp):
// every operation's plan in and out of place, for roots and non-roots, from the buffers
// alone and from the core's planned fields, and the errors a bad op gets.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "procgroup/backend_kit/dtype.hpp"
#include "procgroup/backend_kit/ops.hpp"

namespace procgroup::kit {
namespace {

TEST(KitDtype, SizesAndNames) {
  EXPECT_EQ(dtype_size(PG_DTYPE_F32), 4u);
  EXPECT_EQ(dtype_size(PG_DTYPE_F64), 8u);
  EXPECT_EQ(dtype_size(PG_DTYPE_F16), 2u);
  EXPECT_EQ(dtype_size(PG_DTYPE_BF16), 2u);
  EXPECT_EQ(dtype_size(PG_DTYPE_I8), 1u);
  EXPECT_EQ(dtype_size(PG_DTYPE_U8), 1u);
  EXPECT_EQ(dtype_size(PG_DTYPE_I32), 4u);
  EXPECT_EQ(dtype_size(PG_DTYPE_I64), 8u);
  EXPECT_EQ(dtype_size(PG_DTYPE_INVALID), 0u);
  EXPECT_EQ(dtype_size(PG_DTYPE_COUNT_), 0u);
  EXPECT_EQ(dtype_size(-1), 0u);
  EXPECT_STREQ(dtype_name(PG_DTYPE_BF16), "bf16");
  EXPECT_STREQ(dtype_name(42), "invalid");
  EXPECT_STREQ(reduce_op_name(PG_REDUCE_AVG), "avg");
  EXPECT_STREQ(reduce_op_name(PG_REDUCE_COUNT_), "invalid");
  EXPECT_STREQ(device_name(PG_DEVICE_CUDA), "cuda");
  EXPECT_FALSE(dtype_valid(-3));
  EXPECT_TRUE(dtype_is_floating(PG_DTYPE_F16));
  EXPECT_FALSE(dtype_is_floating(PG_DTYPE_I64));
  EXPECT_FALSE(reduce_op_valid(PG_REDUCE_COUNT_));
  EXPECT_TRUE(reduce_op_valid(PG_REDUCE_MAX));
  std::set<std::string> names;
  for (pg_dtype_t d = 1; d < PG_DTYPE_COUNT_; ++d) names.insert(dtype_name(d));
  EXPECT_EQ(names.size(), static_cast<size_t>(PG_DTYPE_COUNT_ - 1));
}

// Spot checks; tests/unit/collectives/half_test.cc compares every value with a reference.
TEST(KitDtype, ConvertersRoundToNearestEvenAndKeepSpecials) {
  static_assert(half_to_float(0x3e00) == 1.5f);
  static_assert(float_to_half(1.5f) == 0x3e00);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);            // rounds past the largest: Inf
  EXPECT_EQ(float_to_half(1.0f + 1.0f / 2048), 0x3c00);  // half way: to even
  EXPECT_EQ(half_to_float(0x0001), 0x1p-24f);            // smallest subnormal
  const uint16_t nan_half = float_to_half(__builtin_nanf(""));
  EXPECT_TRUE((nan_half & 0x7c00) == 0x7c00 && (nan_half & 0x3ff) != 0) << nan_half;  // not Inf
  EXPECT_EQ(float_to_bf16(1.0f + 1.0f / 256), 0x3f80);  // half way: to even
  EXPECT_EQ(bf16_to_float(0x4049), 3.140625f);
  EXPECT_EQ(float_to_bf16(__builtin_nanf("")) & 0x7fc0, 0x7fc0);  // still a NaN
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    if ((bits & 0x7c00) == 0x7c00 && (bits & 0x3ff) != 0) continue;  // NaNs come back quiet
    ASSERT_EQ(float_to_half(half_to_float(bits)), bits) << h;
    ASSERT_EQ(float_to_bf16(bf16_to_float(bits)), bits) << h;
  }
}

TEST(KitOps, TableIsIndexedByOpAndPointsAtTheRightSlots) {
  pg_backend_ops_t ops{};
  const pg_backend_op_fn* slots[PG_OP_COUNT_] = {
      &ops.allreduce,      &ops.broadcast, &ops.reduce,  &ops.allgather,
      &ops.reduce_scatter, &ops.gather,    &ops.scatter, &ops.alltoall,
      &ops.barrier,        &ops.send,      &ops.recv};
  std::set<std::string> names;
  for (pg_op_t op = 0; op < PG_OP_COUNT_; ++op) {
    EXPECT_EQ(kOps[op].op, op);
    EXPECT_EQ(&(ops.*kOps[op].slot), slots[op]) << op_name(op);
    names.insert(op_name(op));
    EXPECT_EQ(kOps[op].emulated, !kOps[op].p2p) << op_name(op);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(PG_OP_COUNT_));
  EXPECT_STREQ(op_name(PG_OP_REDUCE_SCATTER), "reduce_scatter");
  EXPECT_STREQ(op_name(PG_OP_COUNT_), "invalid");
  EXPECT_STREQ(op_name(-3), "invalid");
  EXPECT_EQ(table_entry(ops, 99), nullptr);
  // Entries are read only as far as the table's struct_size reaches.
  const pg_backend_op_fn fn = [](pg_backend_group_t, const pg_backend_op_t*,
                                 pg_backend_work_t*) -> pg_status_t { return PG_OK; };
  ops.recv = fn;
  ops.allreduce = fn;
  ops.struct_size = PG_BACKEND_OPS_V1_SIZE;
  EXPECT_EQ(table_entry(ops, PG_OP_RECV), fn);
  ops.struct_size = offsetof(pg_backend_ops_t, recv);
  EXPECT_EQ(table_entry(ops, PG_OP_RECV), nullptr);
  EXPECT_EQ(table_entry(ops, PG_OP_ALLREDUCE), fn);
  std::set<pg_op_t> rooted, reducing;
  for (const OpInfo& info : kOps) {
    if (info.rooted) rooted.insert(info.op);
    if (info.reducing) reducing.insert(info.op);
  }
  EXPECT_EQ(rooted,
            (std::set<pg_op_t>{PG_OP_BROADCAST, PG_OP_REDUCE, PG_OP_GATHER, PG_OP_SCATTER}));
  EXPECT_EQ(reducing, (std::set<pg_op_t>{PG_OP_ALLREDUCE, PG_OP_REDUCE, PG_OP_REDUCE_SCATTER}));
  EXPECT_EQ(blocks(kOps[PG_OP_ALLGATHER].output_blocks, 3), 3u);
  EXPECT_EQ(blocks(kOps[PG_OP_ALLGATHER].input_blocks, 3), 1u);
  EXPECT_TRUE(kOps[PG_OP_SCATTER].output_in_input());
  EXPECT_FALSE(kOps[PG_OP_ALLTOALL].output_in_input());
}

// A rank's op over float storage, as a plugin is handed it.
struct OpMaker {
  std::vector<float> storage = std::vector<float>(64);
  pg_backend_op_t op{};

  explicit OpMaker(pg_op_t kind, int root = 0) {
    op.struct_size = offsetof(pg_backend_op_t, block_count);  // no plan: compute it
    op.op = kind;
    op.root = root;
    op.seq = 7;
  }
  pg_buffer_t at(size_t offset, uint64_t count) {
    return pg_buffer_t{sizeof(pg_buffer_t),
                       PG_DTYPE_F32,
                       storage.data() + offset,
                       count,
                       PG_DEVICE_CPU,
                       0,
                       nullptr};
  }
  const std::byte* ptr(size_t offset) {
    return reinterpret_cast<const std::byte*>(storage.data() + offset);
  }
};

Status plan(const pg_backend_op_t& op, int rank, int size, Plan* p) {
  return plan_op(op, rank, size, p);
}

TEST(KitPlan, WholeBufferOpsInAndOutOfPlace) {
  OpMaker m(PG_OP_ALLREDUCE);
  m.op.input = m.at(0, 5);
  m.op.output = m.at(8, 5);
  Plan p;
  ASSERT_TRUE(plan(m.op, 1, 3, &p).ok());
  EXPECT_EQ(p.n, 5u);
  EXPECT_EQ(p.es, 4u);
  EXPECT_EQ(p.dtype, PG_DTYPE_F32);
  EXPECT_EQ(p.in, m.ptr(0));
  EXPECT_EQ(p.out, m.ptr(8));
  EXPECT_FALSE(p.in_place);
  m.op.input = pg_buffer_t{};  // absent: in place
  ASSERT_TRUE(plan(m.op, 1, 3, &p).ok());
  EXPECT_TRUE(p.in_place);
  EXPECT_EQ(p.in, m.ptr(8));

  OpMaker a2a(PG_OP_ALLTOALL);
  a2a.op.input = a2a.at(0, 6);
  a2a.op.output = a2a.at(0, 6);
  ASSERT_TRUE(plan(a2a.op, 0, 3, &p).ok());
  EXPECT_EQ(p.n, 2u);
  EXPECT_TRUE(p.in_place);

  OpMaker bcast(PG_OP_BROADCAST, 2);
  bcast.op.input = bcast.at(0, 4);  // a non-root's input is ignored, whatever it is
  bcast.op.input.count = 1000;
  bcast.op.output = bcast.at(8, 4);
  ASSERT_TRUE(plan(bcast.op, 0, 3, &p).ok());
  EXPECT_EQ(p.n, 4u);
  EXPECT_EQ(p.in, p.out);
}

TEST(KitPlan, GatheredAndScatteredForms) {
  Plan p;
  OpMaker ag(PG_OP_ALLGATHER);
  ag.op.output = ag.at(0, 12);
  ag.op.input = ag.at(8, 4);  // rank 2's block of the output: in place
  ASSERT_TRUE(plan(ag.op, 2, 3, &p).ok());
  EXPECT_EQ(p.n, 4u);
  EXPECT_TRUE(p.in_place);
  ag.op.input = pg_buffer_t{};
  ASSERT_TRUE(plan(ag.op, 1, 3, &p).ok());
  EXPECT_EQ(p.in, ag.ptr(4));
  EXPECT_TRUE(p.in_place);
  ag.op.input = ag.at(40, 4);
  ASSERT_TRUE(plan(ag.op, 1, 3, &p).ok());
  EXPECT_FALSE(p.in_place);

  OpMaker rs(PG_OP_REDUCE_SCATTER);
  rs.op.input = rs.at(0, 9);
  rs.op.output = rs.at(3, 3);  // rank 1's block of the input: in place
  ASSERT_TRUE(plan(rs.op, 1, 3, &p).ok());
  EXPECT_EQ(p.n, 3u);
  EXPECT_TRUE(p.in_place);
  EXPECT_EQ(p.out, rs.ptr(3));

  OpMaker gather(PG_OP_GATHER, 0);  // a non-root: input only
  gather.op.input = gather.at(0, 5);
  ASSERT_TRUE(plan(gather.op, 1, 4, &p).ok());
  EXPECT_EQ(p.n, 5u);
  EXPECT_EQ(p.out, nullptr);

  OpMaker scatter(PG_OP_SCATTER, 0);  // a non-root: output only
  scatter.op.output = scatter.at(0, 5);
  ASSERT_TRUE(plan(scatter.op, 1, 4, &p).ok());
  EXPECT_EQ(p.n, 5u);
  EXPECT_EQ(p.in, nullptr);

  OpMaker reduce(PG_OP_REDUCE, 0);  // a non-root in place: the data is in its output
  reduce.op.output = reduce.at(4, 6);
  ASSERT_TRUE(plan(reduce.op, 2, 3, &p).ok());
  EXPECT_EQ(p.n, 6u);
  EXPECT_EQ(p.in, reduce.ptr(4));
  EXPECT_EQ(p.out, nullptr);
}

TEST(KitPlan, PointToPointAndBarrier) {
  Plan p;
  OpMaker send(PG_OP_SEND);
  send.op.peer = 1;
  send.op.input = send.at(2, 7);
  ASSERT_TRUE(plan(send.op, 0, 2, &p).ok());
  EXPECT_EQ(p.n, 7u);
  EXPECT_EQ(p.in, send.ptr(2));
  EXPECT_EQ(p.out, send.ptr(2));
  OpMaker barrier(PG_OP_BARRIER);
  ASSERT_TRUE(plan(barrier.op, 0, 2, &p).ok());
  EXPECT_EQ(p.n, 0u);
  EXPECT_EQ(p.bytes(), 0u);
}

void expect_invalid(const pg_backend_op_t& op, int rank, int size, const std::string& fragment) {
  Plan p;
  Status st = plan_op(op, rank, size, &p);
  EXPECT_EQ(st.code, PG_ERR_INVALID_ARGUMENT) << st.message;
  EXPECT_NE(st.message.find(fragment), std::string::npos) << st.message;
  EXPECT_NE(st.message.find(" #7: "), std::string::npos) << st.message;
}

TEST(KitPlan, ErrorsNameWhatIsWrong) {
  OpMaker m(PG_OP_ALLREDUCE);
  m.op.input = m.at(0, 5);
  m.op.output = m.at(8, 4);
  expect_invalid(m.op, 0, 2, "input count is 5 but must be 4");
  m.op.output = m.at(2, 5);
  expect_invalid(m.op, 0, 2, "overlap");
  m.op.output = pg_buffer_t{};
  expect_invalid(m.op, 0, 2, "output buffer is NULL");
  m.op.output = m.at(8, 5);
  m.op.reduce_op = 9;
  expect_invalid(m.op, 0, 2, "invalid reduce op 9");
  m.op.reduce_op = PG_REDUCE_SUM;
  m.op.input.dtype = PG_DTYPE_I32;
  expect_invalid(m.op, 0, 2, "input dtype i32 differs from output dtype f32");
  m.op.input = m.at(0, 5);
  m.op.input.data = nullptr;
  expect_invalid(m.op, 0, 2, "data is NULL but count is 5");

  OpMaker ag(PG_OP_ALLGATHER);
  ag.op.output = ag.at(0, 7);
  expect_invalid(ag.op, 0, 2, "output count 7 is not a multiple of the group size 2");
  OpMaker root(PG_OP_BROADCAST, 5);
  root.op.output = root.at(0, 1);
  expect_invalid(root.op, 0, 2, "root 5 is not a rank");
  OpMaker peer(PG_OP_RECV);
  peer.op.peer = -1;
  peer.op.output = peer.at(0, 1);
  expect_invalid(peer.op, 0, 2, "peer -1 is not a rank");
  OpMaker reduce(PG_OP_REDUCE, 0);  // a non-root with nothing to contribute
  expect_invalid(reduce.op, 1, 2, "input buffer is NULL");
  OpMaker alone(PG_OP_ALLGATHER);  // a group of no ranks would divide by zero
  alone.op.output = alone.at(0, 4);
  expect_invalid(alone.op, 0, 0, "rank 0 of a group of size 0 is impossible");
  expect_invalid(alone.op, 2, 2, "rank 2 of a group of size 2");
  OpMaker unknown(PG_OP_COUNT_);
  expect_invalid(unknown.op, 0, 2, "unknown operation");
}

TEST(KitPlan, PlannedFieldsAreTakenAndAZeroPlanIsCaught) {
  OpMaker m(PG_OP_ALLGATHER);
  m.op.output = m.at(0, 12);
  m.op.input = pg_buffer_t{};
  ASSERT_TRUE(fill_plan(&m.op, 2, 3).ok());
  EXPECT_EQ(m.op.struct_size, sizeof(pg_backend_op_t));
  EXPECT_EQ(m.op.block_count, 4u);
  EXPECT_EQ(m.op.in_place, 1u);
  // A plugin given the core's form (input resolved to output + rank*n) gets the same plan.
  m.op.input = m.at(8, 4);
  Plan planned, computed;
  ASSERT_TRUE(plan_op(m.op, 2, 3, &planned).ok());
  ASSERT_TRUE(compute_plan(m.op, 2, 3, &computed).ok());
  EXPECT_EQ(planned.n, computed.n);
  EXPECT_EQ(planned.in, computed.in);
  EXPECT_EQ(planned.out, computed.out);
  EXPECT_EQ(planned.in_place, computed.in_place);
  EXPECT_EQ(planned.dtype, computed.dtype);
  // The plan is trusted, not recomputed: only its agreement with the counts is checked.
  m.op.block_count = 0;
  m.op.in_place = 0;
  expect_invalid(m.op, 2, 3, "planned block_count 0");
}

TEST(KitPlan, CpuOnlyPlansRefuseOtherDevicesAndOversizedCounts) {
  OpMaker m(PG_OP_ALLREDUCE);
  m.op.input = m.op.output = m.at(0, 4);
  Plan p;
  ASSERT_TRUE(plan_cpu_op(m.op, 0, 2, "mine", 8, &p).ok());
  EXPECT_EQ(p.n, 4u);
  EXPECT_TRUE(p.in_place);
  m.op.output.device_type = PG_DEVICE_CUDA;
  Status st = plan_cpu_op(m.op, 0, 2, "mine", 8, &p);
  EXPECT_EQ(st.code, PG_ERR_UNSUPPORTED);
  EXPECT_NE(st.message.find("allreduce #7: the mine backend handles CPU buffers only"),
            std::string::npos)
      << st.message;
  // A plausible count whose largest buffer (n * size * 16 bytes) would not fit a size_t.
  OpMaker big(PG_OP_ALLREDUCE);
  big.op.input = big.op.output = big.at(0, 4);
  big.op.input.count = big.op.output.count = uint64_t{1} << 56;
  st = plan_cpu_op(big.op, 0, 256, "mine", 16, &p);
  EXPECT_EQ(st.code, PG_ERR_INVALID_ARGUMENT);
  EXPECT_NE(st.message.find("is too large"), std::string::npos) << st.message;
}

TEST(KitPlan, DescribeArgsNamesWhatRanksMustPassAlike) {
  EXPECT_EQ(describe_args(PG_OP_REDUCE, PG_DTYPE_F32, 4, PG_REDUCE_MAX, 2), "f32 x 4, max, root 2");
  // Neither the reduce op nor the root applies:
  EXPECT_EQ(describe_args(PG_OP_ALLGATHER, PG_DTYPE_BF16, 4, PG_REDUCE_MAX, 2), "bf16 x 4");
}

}  // namespace
}  // namespace procgroup::kit
