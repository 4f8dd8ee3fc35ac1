#include "common/dtype.h"

#include <gtest/gtest.h>

namespace procgroup::detail {
namespace {

TEST(Dtype, SizesAndNames) {
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
  EXPECT_FALSE(dtype_valid(-3));
  EXPECT_STREQ(dtype_name(PG_DTYPE_BF16), "bf16");
  EXPECT_TRUE(dtype_is_floating(PG_DTYPE_F16));
  EXPECT_FALSE(dtype_is_floating(PG_DTYPE_I64));
  EXPECT_STREQ(reduce_op_name(PG_REDUCE_AVG), "avg");
  EXPECT_FALSE(reduce_op_valid(PG_REDUCE_COUNT_));
  EXPECT_STREQ(op_name(PG_OP_REDUCE_SCATTER), "reduce_scatter");
  EXPECT_STREQ(op_name(99), "invalid");
  EXPECT_STREQ(device_name(PG_DEVICE_CUDA), "cuda");
}

}  // namespace
}  // namespace procgroup::detail
