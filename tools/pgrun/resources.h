// Checks, before any rank starts, that this node can hold the ranks pgrun is asked for: the
// descriptors pgrun keeps per rank (RLIMIT_NOFILE, raised up to its hard limit when that is
// enough) and one process per rank (RLIMIT_NPROC, the cgroup's pids.max, the kernel's pid_max
// and threads-max). A job that cannot fit fails with one message naming the limit, instead of
// starting thousands of ranks and failing half-way ("Too many open files").
//
//   ResourcePlan plan = plan_resources(options.nproc_per_node, options.prefix_output);
//   if (!plan.error.empty()) { report(plan.error); return 1; }
//   request.nofile_limit = plan.child_nofile ? &*plan.child_nofile : nullptr;
#pragma once

#include <sys/resource.h>

#include <optional>
#include <string>

namespace procgroup::pgrun {

struct ResourcePlan {
  std::string error;                   // empty: the ranks fit
  std::optional<rlimit> child_nofile;  // set when pgrun raised its own RLIMIT_NOFILE: the
                                       // ranks get the limit pgrun was started with
};

// Call once, before the first rank starts; may raise pgrun's RLIMIT_NOFILE soft limit.
ResourcePlan plan_resources(int ranks, bool prefix_output);

}  // namespace procgroup::pgrun
