// The nccl plugin's planning, without a device (label unit): which NCCL call an average
// becomes (choose_avg: NCCL 2.28.9's ncclAvg is wrong at one rank, so one rank copies),
// and that the plan's buffers and streams are the ones the op names.
#include <gtest/gtest.h>

#include <cstdint>

#include "nccl_plan.h"

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
  op.struct_size = sizeof op;
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

}  // namespace
}  // namespace procgroup::nccl_backend
