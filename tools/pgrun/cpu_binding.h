// cpu_binding.h — `--bind-to core`: each local rank gets its own share of the CPUs pgrun may
// run on, as mpirun's --bind-to core does (with its PE=n mapping when there are more CPUs
// than ranks), so that a rank's threads are never moved onto another rank's core.
//
//   const CpuBinding binding = plan_cpu_binding(options.nproc_per_node);
//   if (!binding.error.empty()) fail(binding.error);
//   request.cpus = &binding.sets[local];  // sched_setaffinity in the child
#pragma once

#include <sched.h>

#include <string>
#include <vector>

namespace procgroup::pgrun {

struct CpuBinding {
  std::vector<cpu_set_t> sets;         // one per local rank
  std::vector<std::string> cpu_lists;  // the same, as "0-3,8"
  int cpus_available = 0;              // in pgrun's affinity mask
  std::string error;                   // not empty: pgrun's own CPUs could not be read
};

// Splits `cpus` (ascending) among nproc ranks into contiguous shares, the first
// cpus.size() % nproc ranks getting one CPU more; with more ranks than CPUs, rank i gets
// CPU i mod n alone (ranks then share CPUs, as they would unbound).
std::vector<std::vector<int>> split_cpus(const std::vector<int>& cpus, int nproc);

// "0-3,8": CPU numbers, ascending, as /proc/self/status's Cpus_allowed_list writes them.
std::string cpu_list(const std::vector<int>& cpus);

// The split of the CPUs in pgrun's own affinity mask (what taskset, cgroups or a batch
// system left it).
CpuBinding plan_cpu_binding(int nproc);

// "rank 2 on CPUs 0-3, rank 3 on CPUs 4-7" (first_rank: the global rank of local rank 0),
// and a warning when ranks share CPUs.
std::string describe_binding(const CpuBinding& binding, int first_rank);

}  // namespace procgroup::pgrun
