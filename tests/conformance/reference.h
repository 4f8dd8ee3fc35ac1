// Test data and host-side expected results for every collective in every dtype, written
// only against procgroup.h (no library internals), so the installed conformance binary
// judges a plugin independently of the core it runs on.
//
// Data is chosen so that results are exact whatever the reduction order:
// - kExact: data movement, MIN and MAX use values spread over the dtype's whole width
//   (i64 beyond 2^32, f16 fractions); SUM and AVG use multiples of 1/4 (integers for
//   integer dtypes) small enough that every partial sum is representable; PROD uses
//   {-1, 0.5, 1, 2}. Only AVG of floating dtypes allows one ulp (the scaling rounds).
// - kRounding (floating dtypes): uniform values in [-1, 1). SUM and PROD are exact on 1 or
//   2 ranks (one rounding, to nearest even) and within size ulp (of sum(|x_r|), of the
//   product) above that, since backends may reduce in any order and round after every step
//   (gloo's f16/bf16); AVG adds the scaling's ulp; MIN and MAX stay exact.
//
//   CollectiveCase c{PG_OP_ALLREDUCE, PG_DTYPE_BF16, PG_REDUCE_SUM, 7};
//   double x = input_value(c, rank, size, i);   // what rank contributes at element i
//   Expected e = expected_output(c, rank, size, i);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "procgroup/procgroup.h"

namespace pgtest {

enum class Pattern : uint8_t { kExact, kRounding };
// How an in-place case passes its buffers: input NULL, or input->data at the in-place
// address (both are the API's in-place form).
enum class InPlace : uint8_t { kNo, kNullInput, kAliased };

struct CollectiveCase {
  pg_op_t op = PG_OP_ALLREDUCE;
  pg_dtype_t dtype = PG_DTYPE_F32;
  pg_reduce_op_t redop = PG_REDUCE_SUM;
  uint64_t n = 1;  // elements per rank (the count rules of procgroup.h)
  int root = 0;
  InPlace in_place = InPlace::kNo;
  Pattern pattern = Pattern::kExact;
  uint32_t salt = 0;  // varies the data between otherwise equal cases
  std::string to_string() const;
};

struct Expected {
  double value = 0;
  double tolerance = 0;  // 0: bit-exact value (up to the sign of zero)
};

bool reduces(pg_op_t op);
bool rooted(pg_op_t op);
bool input_is_blocked(pg_op_t op);   // input holds size * n elements
bool output_is_blocked(pg_op_t op);  // output holds size * n elements

// Element i of the input of `rank` (i < size * n for blocked inputs).
double input_value(const CollectiveCase& c, int rank, int size, uint64_t i);
// Element i of the output of `rank`.
Expected expected_output(const CollectiveCase& c, int rank, int size, uint64_t i);
bool matches(const Expected& e, double got);

// A value for point-to-point payloads: element i of the message `salt` from src to dst.
double message_value(pg_dtype_t dtype, int src, int dst, uint32_t salt, uint64_t i);

// Typed element access; values must be representable in dtype (the patterns guarantee it).
size_t dtype_size(pg_dtype_t dtype);
void store_value(pg_dtype_t dtype, void* base, uint64_t i, double value);
double load_value(pg_dtype_t dtype, const void* base, uint64_t i);
// Nearest representable value, ties to even (independent of the library's converters).
double round_to_dtype(pg_dtype_t dtype, double x);

const char* dtype_name(pg_dtype_t dtype);
const char* reduce_op_name(pg_reduce_op_t op);
const char* op_name(pg_op_t op);
bool is_floating(pg_dtype_t dtype);

std::vector<pg_dtype_t> all_dtypes();
std::vector<pg_reduce_op_t> all_reduce_ops();
std::vector<pg_op_t> all_collectives();  // every op but barrier, send and recv

}  // namespace pgtest
