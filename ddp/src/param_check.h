// param_check.h — the construction-time agreement check of the Reducer: every rank learns
// whether all ranks registered the same parameters and options, and if not, what differs,
// from data all ranks share, so all of them throw the same ddp::Error and none hangs.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "device.h"
#include "procgroup/ddp/tensor.h"
#include "procgroup/procgroup.hpp"

namespace procgroup::ddp::detail {

// What every rank must agree on besides the parameter list.
struct ReducerConfig {
  uint64_t first_bucket_bytes = 0;
  uint64_t bucket_cap_bytes = 0;
  std::string hook_name;
};

// A problem this rank found on its own (e.g. a CUDA parameter); PG_OK when none.
struct LocalProblem {
  pg_status_t status = PG_OK;
  std::string message;
};

// Collective. Throws ddp::Error on every rank when any rank has a local problem or the
// ranks' parameter lists (count, names, sizes, dtypes, device types) or configs differ.
// Device indices are not compared: each rank trains on its own GPU. The exchange runs on
// host memory, staged through `via` when the backend has no CPU buffers.
void check_parameters_agree(const Group& group, std::span<const Parameter> params,
                            const ReducerConfig& config, const LocalProblem& problem,
                            const Exec& via);

}  // namespace procgroup::ddp::detail
