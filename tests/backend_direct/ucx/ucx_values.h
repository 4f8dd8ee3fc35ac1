// ucx_values.h — typed test data and the host-side expected results for the ucx tests.
// Contributions are small integers chosen so sums, products, minima and maxima are exact in
// every dtype (i8 and f16 included) for up to 8 ranks; AVG is compared with a tolerance on
// floating dtypes and truncated like NCCL on integer ones.
//
//   Typed in(PG_DTYPE_BF16, n);
//   for (uint64_t i = 0; i < n; ++i) in.set(i, contribution(rank, i, PG_REDUCE_SUM, in.dtype));
//   ... allreduce ...
//   ok = matches(dtype, op, out.get(i), reduced(size, i, op, dtype));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "procgroup/procgroup_backend.h"

namespace procgroup::ucx_test {

const char* op_label(pg_op_t op);
const char* dtype_label(pg_dtype_t dtype);
const char* reduce_label(pg_reduce_op_t op);
size_t dtype_bytes(pg_dtype_t dtype);
std::vector<pg_dtype_t> all_dtypes();
std::vector<pg_reduce_op_t> all_reduce_ops();

// A CPU buffer of count elements of dtype, read and written as doubles.
class Typed {
 public:
  Typed(pg_dtype_t dtype, uint64_t count);
  void set(uint64_t i, double value);
  double get(uint64_t i) const;
  void fill(double value);
  void* data() { return bytes_.data(); }
  std::byte* at(uint64_t i) { return reinterpret_cast<std::byte*>(bytes_.data()) + i * es_; }
  uint64_t count() const { return count_; }
  pg_dtype_t dtype() const { return dtype_; }

 private:
  pg_dtype_t dtype_;
  uint64_t count_;
  size_t es_;
  std::vector<uint8_t> bytes_;
};

// What rank contributes at element i of its input for a reduction with op.
double contribution(int rank, uint64_t i, pg_reduce_op_t op, pg_dtype_t dtype);
// The reduction of contribution(r, i, ...) over ranks 0..size-1.
double reduced(int size, uint64_t i, pg_reduce_op_t op, pg_dtype_t dtype);
// Data for moves (broadcast, gathers, alltoall): distinct per (rank, i), exact in every dtype.
double payload(int rank, uint64_t i, pg_dtype_t dtype);
bool matches(pg_dtype_t dtype, pg_reduce_op_t op, double got, double want);

}  // namespace procgroup::ucx_test
