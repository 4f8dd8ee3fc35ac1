// The nccl plugin's planning, without a device (label unit): which NCCL call an average
// becomes (choose_avg: NCCL 2.28.9's ncclAvg is wrong at one rank, so one rank copies),
// and that the plan's buffers and streams are the ones the op names.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "nccl_plan.h"
#include "procgroup/backend_kit/ops.hpp"

namespace procgroup::nccl_backend {
namespace {

// A CUDA buffer on cuda:0; planning never dereferences it.
pg_buffer_t cuda_buffer(uintptr_t address, uint64_t count, void* stream = nullptr) {
  pg_buffer_t b{};
  b.struct_size = sizeof b;
  b.dtype = PG_DTYPE_F64;
  b.data = reinterpret_cast<void*>(address);
  b.count = count;
  b.device_type = PG_DEVICE_CUDA;
  b.stream = stream;
  return b;
}

pg_backend_op_t op_of(int32_t kind, int32_t reduce_op, uint64_t in_count, uint64_t out_count) {
  pg_backend_op_t op{};
  op.struct_size = offsetof(pg_backend_op_t, block_count);  // unplanned, as without a core
  op.op = kind;
  op.reduce_op = reduce_op;
  op.seq = 1;
  op.input = cuda_buffer(0x1000, in_count);
  op.output = cuda_buffer(0x100000, out_count);
  return op;
}

TEST(NcclPlan, AverageIsACopyAtOneRankAndNcclAvgAtMore) {
  EXPECT_EQ(choose_avg(1), AvgMethod::kCopy);
  EXPECT_EQ(choose_avg(2), AvgMethod::kNccl);
  EXPECT_EQ(choose_avg(8), AvgMethod::kNccl);
  for (int32_t kind : {PG_OP_ALLREDUCE, PG_OP_REDUCE, PG_OP_REDUCE_SCATTER}) {
    SCOPED_TRACE(kind);
    Plan one;
    ASSERT_TRUE(make_plan(op_of(kind, PG_REDUCE_AVG, 4099, 4099), 0, 1, 0, &one).ok());
    EXPECT_TRUE(one.copy_instead);
    EXPECT_EQ(one.bytes(), 4099u * 8);
    Plan two;
    ASSERT_TRUE(make_plan(op_of(kind, PG_REDUCE_AVG, 4098, kind == PG_OP_REDUCE_SCATTER ? 2049 : 4098),
                          0, 2, 0, &two)
                    .ok());
    EXPECT_FALSE(two.copy_instead);
    EXPECT_EQ(two.redop, ncclAvg);
    Plan sum;
    ASSERT_TRUE(make_plan(op_of(kind, PG_REDUCE_SUM, 4099, 4099), 0, 1, 0, &sum).ok());
    EXPECT_FALSE(sum.copy_instead) << "only the average needs the copy";
  }
}

TEST(NcclPlan, BuffersSharingAStreamNameItOnce) {
  int a = 0, b = 0;
  pg_backend_op_t op = op_of(PG_OP_ALLREDUCE, PG_REDUCE_SUM, 16, 16);
  op.input.stream = op.output.stream = &a;
  Plan same;
  ASSERT_TRUE(make_plan(op, 0, 1, 0, &same).ok());
  EXPECT_EQ(same.buffer_count, 2u);
  ASSERT_EQ(same.stream_count, 1u) << "one stream: the operation runs on it directly";
  EXPECT_EQ(same.streams[0], static_cast<cudaStream_t>(static_cast<void*>(&a)));
  op.output.stream = &b;
  Plan two;
  ASSERT_TRUE(make_plan(op, 0, 1, 0, &two).ok());
  EXPECT_EQ(two.stream_count, 2u) << "two streams: the internal stream waits for both";
}

// What NCCL is handed for each operation, out of place and in place, on rank 1 of 4: its
// count (per rank where NCCL says so), what it reads and what it writes.
TEST(NcclPlan, EveryOperationMapsOntoNcclsArguments) {
  constexpr int kRank = 1, kSize = 4;
  constexpr uint64_t n = 6;
  constexpr uintptr_t in = 0x10000, out = 0x20000;
  struct Case {
    int32_t kind;
    uint64_t in_count, out_count;
    uintptr_t in_at;  // 0: the separate input buffer
    uintptr_t send, recv;
    size_t scratch;
  };
  const Case cases[] = {
      {PG_OP_ALLREDUCE, n, n, 0, in, out, 0},
      {PG_OP_ALLREDUCE, n, n, out, out, out, 0},  // in place
      {PG_OP_BROADCAST, 0, n, 0, out, out, 0},    // not the root: NCCL reads nothing
      {PG_OP_REDUCE, n, 0, 0, in, in, 0},         // not the root: NCCL writes nothing
      {PG_OP_ALLGATHER, n, kSize * n, 0, in, out, 0},
      {PG_OP_ALLGATHER, n, kSize * n, out + kRank * n * 8, out + kRank * n * 8, out, 0},
      {PG_OP_REDUCE_SCATTER, kSize * n, n, 0, in, out, 0},
      {PG_OP_GATHER, n, 0, 0, in, in, 0},
      {PG_OP_SCATTER, 0, n, 0, out, out, 0},
      {PG_OP_ALLTOALL, kSize * n, kSize * n, 0, in, out, 0},
      {PG_OP_ALLTOALL, kSize * n, kSize * n, out, out, out, kSize * n * 8},  // in place: a copy
      {PG_OP_SEND, n, 0, 0, in, in, 0},
      {PG_OP_RECV, 0, n, 0, out, out, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.kind) + (c.in_at != 0 ? " in place" : ""));
    pg_backend_op_t op = op_of(c.kind, PG_REDUCE_SUM, c.in_count, c.out_count);
    op.root = 0;
    op.peer = 2;
    op.input = cuda_buffer(c.in_at != 0 ? c.in_at : in, c.in_count);
    op.output = cuda_buffer(out, c.out_count);
    if (c.in_count == 0) op.input = pg_buffer_t{};
    if (c.out_count == 0) op.output = pg_buffer_t{};
    pg_backend_op_t planned = op;  // as the core hands it over: with its plan
    ASSERT_TRUE(kit::fill_plan(&planned, kRank, kSize).ok());
    for (const pg_backend_op_t* o : {&op, &planned}) {
      Plan plan;
      const Status st = make_plan(*o, kRank, kSize, 0, &plan);
      ASSERT_TRUE(st.ok()) << st.message;
      EXPECT_EQ(plan.count, n);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(plan.send), c.send);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(plan.recv), c.recv);
      EXPECT_EQ(plan.scratch_bytes, c.scratch);
      EXPECT_EQ(plan.dtype, ncclFloat64);
    }
  }
}

TEST(NcclPlan, ShapesThatDoNotFitAreRefusedWithTheOpsLabel) {
  pg_backend_op_t op = op_of(PG_OP_REDUCE_SCATTER, PG_REDUCE_SUM, 10, 3);  // 10 != 4 * 3
  Plan plan;
  Status st = make_plan(op, 0, 4, 0, &plan);
  EXPECT_EQ(st.code, PG_ERR_INVALID_ARGUMENT);
  EXPECT_NE(st.message.find("nccl: reduce_scatter #1"), std::string::npos) << st.message;
  op = op_of(PG_OP_ALLREDUCE, 77, 4, 4);
  EXPECT_EQ(make_plan(op, 0, 2, 0, &plan).code, PG_ERR_INVALID_ARGUMENT);
  op = op_of(PG_OP_ALLREDUCE, PG_REDUCE_SUM, 4, 4);
  op.output.device_index = 1;
  st = make_plan(op, 0, 2, 0, &plan);
  EXPECT_NE(st.message.find("cuda:1"), std::string::npos) << st.message;
  op = op_of(PG_OP_ALLREDUCE, PG_REDUCE_SUM, 4, 4);
  op.input.device_type = PG_DEVICE_CPU;
  EXPECT_EQ(make_plan(op, 0, 2, 0, &plan).code, PG_ERR_UNSUPPORTED);
}

// What Group::submit refuses before the communicator is used: a CPU buffer for every op
// (with the way out), and malformed buffers.
TEST(NcclPlan, BuffersNcclCannotTakeAreRefusedFirst) {
  for (int32_t kind = 0; kind < PG_OP_COUNT_; ++kind) {
    if (kind == PG_OP_BARRIER) continue;  // has no buffer
    SCOPED_TRACE(kind);
    pg_backend_op_t op = op_of(kind, PG_REDUCE_SUM, 4, 4);
    op.input.device_type = op.output.device_type = PG_DEVICE_CPU;
    const Status st = check_buffer_kinds(op);
    EXPECT_EQ(st.code, PG_ERR_UNSUPPORTED);
    EXPECT_NE(st.message.find("CPU memory"), std::string::npos) << st.message;
    EXPECT_NE(st.message.find("PROCGROUP_BACKEND=gloo"), std::string::npos) << st.message;
  }
  struct Case {
    pg_dtype_t dtype;
    int32_t device_type;
    bool null_data;
    pg_status_t want;
    const char* words;
  };
  for (const Case& c : {Case{PG_DTYPE_INVALID, PG_DEVICE_CUDA, false, PG_ERR_INVALID_ARGUMENT,
                             "no dtype"},
                        Case{99, PG_DEVICE_CUDA, false, PG_ERR_UNSUPPORTED, "dtype 99"},
                        Case{PG_DTYPE_F32, 7, false, PG_ERR_INVALID_ARGUMENT,
                             "unknown device type 7"},
                        Case{PG_DTYPE_F32, PG_DEVICE_CUDA, true, PG_ERR_INVALID_ARGUMENT,
                             "NULL"}}) {
    pg_backend_op_t op = op_of(PG_OP_ALLREDUCE, PG_REDUCE_SUM, 4, 4);
    for (pg_buffer_t* b : {&op.input, &op.output}) {
      b->dtype = c.dtype;
      b->device_type = c.device_type;
      if (c.null_data) b->data = nullptr;
    }
    const Status st = check_buffer_kinds(op);
    EXPECT_EQ(st.code, c.want) << c.words;
    EXPECT_NE(st.message.find(c.words), std::string::npos) << st.message;
  }
}

}  // namespace
}  // namespace procgroup::nccl_backend
