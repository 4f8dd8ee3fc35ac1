// How `pgrun --bind-to core` splits CPUs among a node's ranks, in-process.
#include "cpu_binding.h"

#include <gtest/gtest.h>

#include <vector>

namespace procgroup::pgrun {
namespace {

using Shares = std::vector<std::vector<int>>;

TEST(CpuBinding, AsManyRanksAsCpusGetOneCoreEach) {
  EXPECT_EQ(split_cpus({0, 1}, 2), (Shares{{0}, {1}}));
}

TEST(CpuBinding, FewerRanksGetContiguousSharesTheFirstOnesOneMore) {
  EXPECT_EQ(split_cpus({0, 1, 2, 3, 4, 5, 6, 7}, 2), (Shares{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(split_cpus({0, 1, 2, 3, 4}, 3), (Shares{{0, 1}, {2, 3}, {4}}));
}

TEST(CpuBinding, OnlyTheCpusPgrunMayUse) {
  // e.g. under `taskset -c 2,3,6,7`: the shares come from those, in order.
  EXPECT_EQ(split_cpus({2, 3, 6, 7}, 2), (Shares{{2, 3}, {6, 7}}));
}

TEST(CpuBinding, MoreRanksThanCpusShareThemRoundRobin) {
  EXPECT_EQ(split_cpus({0, 1}, 3), (Shares{{0}, {1}, {0}}));
  CpuBinding binding;
  binding.cpu_lists = {"0", "1", "0"};
  binding.cpus_available = 2;
  EXPECT_EQ(describe_binding(binding, 3),
            "rank 3 on CPU 0, rank 4 on CPU 1, rank 5 on CPU 0 (3 ranks share 2 CPUs)");
}

TEST(CpuBinding, ListsWriteRangesAsTheKernelDoes) {
  EXPECT_EQ(cpu_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(cpu_list({5}), "5");
  EXPECT_EQ(cpu_list({}), "");
}

TEST(CpuBinding, PlansFromThisProcessesAffinity) {
  cpu_set_t mine;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(mine), &mine), 0);
  const CpuBinding binding = plan_cpu_binding(2);
  ASSERT_TRUE(binding.error.empty()) << binding.error;
  ASSERT_EQ(binding.sets.size(), 2u);
  EXPECT_EQ(binding.cpus_available, CPU_COUNT(&mine));
  for (const cpu_set_t& set : binding.sets) {
    cpu_set_t outside;
    CPU_XOR(&outside, &set, &mine);
    CPU_AND(&outside, &outside, &set);
    EXPECT_EQ(CPU_COUNT(&outside), 0) << "a rank got a CPU pgrun may not use";
    EXPECT_GE(CPU_COUNT(&set), 1);
  }
}

}  // namespace
}  // namespace procgroup::pgrun
