// The core's side of the planned op: make_op_args validates a user's call and backend_op_of
// hands it to a plugin with block_count and in_place filled. For every operation, rank and
// in-place form, the plan a plugin reads from those fields must equal the plan the kit
// computes from the buffers alone (what a plugin under an older core does).
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "core/op_args.h"
#include "procgroup/backend_kit/ops.hpp"

namespace procgroup::detail {
namespace {

constexpr int kSize = 3;
constexpr uint64_t kN = 4;

// The forms a rank may pass an operation's buffers in.
enum class Form { kOutOfPlace, kInPlaceNull, kInPlaceAddress, kNothing };

struct Call {
  std::vector<float> storage = std::vector<float>(64, 0.0f);
  pg_buffer_t in{}, out{};
  const pg_buffer_t* input = nullptr;
  const pg_buffer_t* output = nullptr;

  Call(pg_op_t op, Form form, int rank) {
    const kit::OpInfo& info = kit::op_info(op);
    const uint64_t in_count = kit::blocks(info.input_blocks, kSize) * kN;
    const uint64_t out_count = kit::blocks(info.output_blocks, kSize) * kN;
    if (form == Form::kNothing) return;
    if (info.output != kit::Ranks::kNone) {
      out = pg_buffer_cpu(storage.data() + 32, out_count, PG_DTYPE_F32);
      output = &out;
    }
    if (info.input == kit::Ranks::kNone || form == Form::kInPlaceNull) return;
    size_t at = 0;  // out of place: input at the start, output at 32
    if (form == Form::kInPlaceAddress) {
      // allgather/gather: input at output + rank*n; reduce_scatter/scatter: output at
      // input + rank*n; the rest: input == output.
      if (info.output_in_input()) {
        out = pg_buffer_cpu(storage.data() + rank * kN, kN, PG_DTYPE_F32);
      } else {
        at = 32 + (info.in_place_at_rank() ? rank * kN : 0);
      }
    }
    in = pg_buffer_cpu(storage.data() + at, in_count, PG_DTYPE_F32);
    input = &in;
  }
};

void expect_same_plan(const kit::Plan& a, const kit::Plan& b, const std::string& what) {
  EXPECT_EQ(a.n, b.n) << what;
  EXPECT_EQ(a.in, b.in) << what;
  EXPECT_EQ(a.out, b.out) << what;
  EXPECT_EQ(a.in_place, b.in_place) << what;
  EXPECT_EQ(a.dtype, b.dtype) << what;
  EXPECT_EQ(a.es, b.es) << what;
}

TEST(CorePlan, PlannedFieldsEqualThePlanComputedFromTheBuffers) {
  int accepted = 0, in_place = 0;
  for (pg_op_t op = 0; op < PG_OP_COUNT_; ++op) {
    for (Form form :
         {Form::kOutOfPlace, Form::kInPlaceNull, Form::kInPlaceAddress, Form::kNothing}) {
      for (int rank = 0; rank < kSize; ++rank) {
        Call call(op, form, rank);
        pg_op_options_t options = PG_OP_OPTIONS_INIT;
        options.root = 1;
        options.peer = (rank + 1) % kSize;
        const std::string what = std::string(kit::op_name(op)) + " form " +
                                 std::to_string(static_cast<int>(form)) + " rank " +
                                 std::to_string(rank);
        Result<OpArgs> args = make_op_args(op, call.input, call.output, options, rank, kSize);
        if (!args.ok()) continue;  // e.g. a root with nothing to send: checked below
        ++accepted;
        const pg_backend_op_t planned = backend_op_of(*args, 9, 1000);
        EXPECT_EQ(planned.block_count, op == PG_OP_BARRIER ? 0 : kN) << what;
        in_place += planned.in_place;
        pg_backend_op_t old_core = planned;
        old_core.struct_size = offsetof(pg_backend_op_t, block_count);
        kit::Plan from_fields, from_buffers;
        kit::Status st = kit::plan_op(planned, rank, kSize, &from_fields);
        ASSERT_TRUE(st.ok()) << what << ": " << st.message;
        st = kit::plan_op(old_core, rank, kSize, &from_buffers);
        ASSERT_TRUE(st.ok()) << what << ": " << st.message;
        expect_same_plan(from_fields, from_buffers, what);
      }
    }
  }
  EXPECT_GT(accepted, 80);
  EXPECT_GT(in_place, 30);
}

TEST(CorePlan, InPlaceForms) {
  pg_op_options_t options = PG_OP_OPTIONS_INIT;
  Call gather(PG_OP_ALLGATHER, Form::kInPlaceNull, 2);
  Result<OpArgs> a = make_op_args(PG_OP_ALLGATHER, gather.input, gather.output, options, 2, kSize);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_TRUE(a->in_place);
  EXPECT_EQ(a->input.data, gather.storage.data() + 32 + 2 * kN);
  EXPECT_EQ(a->input.count, kN);
  Call scatter(PG_OP_REDUCE_SCATTER, Form::kInPlaceAddress, 1);
  a = make_op_args(PG_OP_REDUCE_SCATTER, scatter.input, scatter.output, options, 1, kSize);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_TRUE(a->in_place);
  Call apart(PG_OP_ALLREDUCE, Form::kOutOfPlace, 0);
  a = make_op_args(PG_OP_ALLREDUCE, apart.input, apart.output, options, 0, kSize);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_FALSE(a->in_place);
}

// A non-root of reduce has data to give, as input or (in place) as output: passing neither
// dereferenced a NULL pointer before the op table drove make_op_args.
TEST(CorePlan, ReduceNonRootWithoutBuffersIsAnError) {
  pg_op_options_t options = PG_OP_OPTIONS_INIT;
  options.root = 0;
  Result<OpArgs> a = make_op_args(PG_OP_REDUCE, nullptr, nullptr, options, 1, kSize);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), PG_ERR_INVALID_ARGUMENT);
  EXPECT_NE(a.status().message().find("reduce: input buffer is NULL"), std::string::npos)
      << a.status().message();
}

}  // namespace
}  // namespace procgroup::detail
