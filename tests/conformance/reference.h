// Test data and host-side expected results for every collective, in every dtype.
// Values are small integers so sums and products are exact in every dtype (f16/bf16
// included); AVG is compared with a tolerance for floating dtypes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "procgroup/procgroup.h"

namespace pgtest {

// The value rank r contributes at element i (i indexes the rank's whole input).
double input_value(int rank, uint64_t i, pg_reduce_op_t op);

// Expected element i of rank `rank`'s output (n elements per rank, `size` ranks).
double expected_value(pg_op_t op, pg_reduce_op_t redop, pg_dtype_t dtype, int rank, int size,
                      int root, uint64_t n, uint64_t i);

// Typed storage of doubles converted to dtype, and back.
std::vector<uint8_t> encode(pg_dtype_t dtype, const std::vector<double>& values);
double decode(pg_dtype_t dtype, const std::vector<uint8_t>& bytes, uint64_t i);

bool close_enough(pg_dtype_t dtype, pg_reduce_op_t op, double got, double want);

// Every dtype / reduce op of the ABI.
std::vector<pg_dtype_t> all_dtypes();
std::vector<pg_reduce_op_t> all_reduce_ops();

}  // namespace pgtest
