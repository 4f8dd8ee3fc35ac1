// Test data for the collectives: typed access to untyped buffers through double, integer
// valued inputs whose sums and products are exact in every dtype (so any reduction order
// gives the same answer), and a host-side reference reduction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "procgroup/procgroup.h"

namespace procgroup::detail::testing {

inline constexpr pg_dtype_t kAllDtypes[] = {PG_DTYPE_F32, PG_DTYPE_F64, PG_DTYPE_F16, PG_DTYPE_BF16,
                                            PG_DTYPE_I8,  PG_DTYPE_U8,  PG_DTYPE_I32, PG_DTYPE_I64};
inline constexpr pg_reduce_op_t kAllOps[] = {PG_REDUCE_SUM, PG_REDUCE_AVG, PG_REDUCE_PROD,
                                             PG_REDUCE_MIN, PG_REDUCE_MAX};

using Bytes = std::vector<uint8_t>;

// Element i of a buffer of dtype, as double (integers exactly).
double load(pg_dtype_t dtype, const void* data, uint64_t i);
// Stores v into element i: floats rounded to the dtype, integers wrapped modulo 2^bits
// (v must be integral for them).
void store(pg_dtype_t dtype, void* data, uint64_t i, double v);

// Rank `rank`'s contribution to element i of a reduction with `op` (or any other
// collective: SUM values). Integral, small: SUM of 8 ranks stays within i8; PROD uses
// +-1 and +-2 (exact in bf16); MIN/MAX values are spread so ranks differ.
double input_value(pg_dtype_t dtype, pg_reduce_op_t op, int rank, uint64_t i);
// A buffer of count elements filled with input_value(..., first + j) for j < count.
Bytes make_input(pg_dtype_t dtype, pg_reduce_op_t op, int rank, uint64_t count, uint64_t first = 0);

// The reduction over ranks 0..size-1 of input_value(dtype, op, r, first + j), for
// j < count, as the dtype's bytes: integers with wrapping sum/product and truncating AVG;
// floats exact, and AVG as sum * (1 / size) rounded in the element's working precision.
Bytes reference_reduce(pg_dtype_t dtype, pg_reduce_op_t op, int size, uint64_t count,
                       uint64_t first = 0);

// "f16 avg", for failure messages.
std::string describe(pg_dtype_t dtype, pg_reduce_op_t op);

}  // namespace procgroup::detail::testing
