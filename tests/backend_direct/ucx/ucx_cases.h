// ucx_cases.h — one collective with reference data, started on one rank and checked
// element by element against the host-side expectation (ucx_values.h).
//
//   Pending p = start_case(env, Case{PG_OP_ALLREDUCE, PG_DTYPE_F16, PG_REDUCE_AVG, 97});
//   std::string bad = finish_case(env, p);   // "" or the first wrong element
#pragma once

#include <memory>
#include <string>

#include "ucx_test_support.h"
#include "ucx_values.h"

namespace procgroup::ucx_test {

struct Case {
  pg_op_t op = PG_OP_ALLREDUCE;
  pg_dtype_t dtype = PG_DTYPE_F32;
  pg_reduce_op_t redop = PG_REDUCE_SUM;
  uint64_t n = 1;  // elements per rank (per block)
  int root = 0;
  bool in_place = false;
  std::string to_string() const;
};

struct Pending {
  Case c;
  std::unique_ptr<Typed> in;
  std::unique_ptr<Typed> out;
  bool result_in_input = false;  // in-place reduce_scatter/scatter: inside `in`, at out_offset
  uint64_t out_offset = 0;
  Work work;
};

Pending start_case(RankEnv& env, const Case& c);
// Waits for the work and checks every output element: "" or what is wrong.
std::string finish_case(RankEnv& env, Pending& p);

}  // namespace procgroup::ucx_test
