#include "cpu_binding.h"

#include <cerrno>
#include <cstring>

namespace procgroup::pgrun {

std::vector<std::vector<int>> split_cpus(const std::vector<int>& cpus, int nproc) {
  std::vector<std::vector<int>> shares(static_cast<size_t>(nproc));
  const size_t n = cpus.size();
  if (n == 0) return shares;
  const auto ranks = static_cast<size_t>(nproc);
  if (ranks > n) {
    for (size_t r = 0; r < ranks; ++r) shares[r] = {cpus[r % n]};
    return shares;
  }
  size_t next = 0;
  for (size_t r = 0; r < ranks; ++r) {
    const size_t take = n / ranks + (r < n % ranks ? 1 : 0);
    shares[r].assign(cpus.begin() + static_cast<std::ptrdiff_t>(next),
                     cpus.begin() + static_cast<std::ptrdiff_t>(next + take));
    next += take;
  }
  return shares;
}

std::string cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

CpuBinding plan_cpu_binding(int nproc) {
  CpuBinding binding;
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (::sched_getaffinity(0, sizeof(mine), &mine) != 0) {
    binding.error =
        std::string("--bind-to core: cannot read pgrun's CPU affinity: ") + std::strerror(errno);
    return binding;
  }
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &mine)) cpus.push_back(cpu);
  }
  binding.cpus_available = static_cast<int>(cpus.size());
  for (const std::vector<int>& share : split_cpus(cpus, nproc)) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu : share) CPU_SET(cpu, &set);
    binding.sets.push_back(set);
    binding.cpu_lists.push_back(cpu_list(share));
  }
  return binding;
}

std::string describe_binding(const CpuBinding& binding, int first_rank) {
  std::string out;
  for (size_t local = 0; local < binding.cpu_lists.size(); ++local) {
    if (!out.empty()) out += ", ";
    const std::string& list = binding.cpu_lists[local];
    const bool several = list.find_first_of(",-") != std::string::npos;
    out += "rank " + std::to_string(first_rank + static_cast<int>(local)) +
           (several ? " on CPUs " : " on CPU ") + list;
  }
  const auto ranks = static_cast<int>(binding.cpu_lists.size());
  if (ranks > binding.cpus_available) {
    out += " (" + std::to_string(ranks) + " ranks share " + std::to_string(binding.cpus_available) +
           " CPUs)";
  }
  return out;
}

}  // namespace procgroup::pgrun
