// Runs one collective on one rank with reference data and checks every output element.
#pragma once

#include <string>

#include "procgroup/procgroup.h"

namespace pgtest {

struct CollectiveCase {
  pg_op_t op = PG_OP_ALLREDUCE;
  pg_dtype_t dtype = PG_DTYPE_F32;
  pg_reduce_op_t redop = PG_REDUCE_SUM;
  uint64_t n = 1;  // elements per rank
  int root = 0;
  bool in_place = false;
  std::string to_string() const;
};

// Issues the case on group (async, so a batch can be in flight) and returns a checker to
// call after the work completed: it returns "" or a description of the first mismatch.
class PendingCheck {
 public:
  virtual ~PendingCheck() = default;
  virtual std::string verify() = 0;
  pg_work_t work = nullptr;
};

// Starts the case; on a submission failure returns nullptr and sets *error.
PendingCheck* start_case(pg_group_t group, int rank, int size, const CollectiveCase& c,
                         std::string* error);

// start_case + wait + verify: "" on success.
std::string run_case(pg_group_t group, int rank, int size, const CollectiveCase& c);

}  // namespace pgtest
