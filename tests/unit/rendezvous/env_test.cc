// resolve_group_config() with an injected environment: each launcher's variables, explicit
// options overriding them, and every malformed or missing value, whose error must name the
// variable (or option field) at fault.
#include "rendezvous/env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "env_test_util.h"

namespace procgroup::detail {
namespace {

using env_testing::kTwoRanks;
using env_testing::lookup_of;
using env_testing::Vars;
using env_testing::with;

// ---- Well-formed environments --------------------------------------------------------

struct GoodCase {
  const char* name;
  Vars env;
  int rank, size, local_rank, local_size;
  const char* master_addr;
  int port;
  const char* store_url;
  const char* launcher;
};
void PrintTo(const GoodCase& c, std::ostream* os) { *os << c.name; }

class EnvGoodTest : public ::testing::TestWithParam<GoodCase> {};

TEST_P(EnvGoodTest, Resolves) {
  const GoodCase& c = GetParam();
  auto config = resolve_group_config(nullptr, lookup_of(c.env));
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->rank, c.rank);
  EXPECT_EQ(config->size, c.size);
  EXPECT_EQ(config->local_rank, c.local_rank);
  EXPECT_EQ(config->local_size, c.local_size);
  EXPECT_EQ(config->master_addr, c.master_addr);
  EXPECT_EQ(config->master_port, c.port);
  EXPECT_EQ(config->store_url, c.store_url);
  EXPECT_EQ(config->launcher, c.launcher);
  EXPECT_EQ(config->name, "world");
}

const GoodCase kGoodCases[] = {
    {"TorchrunFull",
     {{"RANK", "1"},
      {"WORLD_SIZE", "4"},
      {"LOCAL_RANK", "1"},
      {"LOCAL_WORLD_SIZE", "4"},
      {"MASTER_ADDR", "10.0.0.1"},
      {"MASTER_PORT", "1234"}},
     1,
     4,
     1,
     4,
     "10.0.0.1",
     1234,
     "tcp://10.0.0.1:1234",
     "torchrun"},
    {"TorchrunMultiNode",
     {{"RANK", "5"},
      {"WORLD_SIZE", "8"},
      {"LOCAL_RANK", "1"},
      {"LOCAL_WORLD_SIZE", "4"},
      {"MASTER_ADDR", "node0"}},
     5,
     8,
     1,
     4,
     "node0",
     29500,
     "tcp://node0:29500",
     "torchrun"},
    {"TorchrunOneNodeDefaultsToLoopback",
     {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "2"}},
     0,
     2,
     0,
     2,
     "127.0.0.1",
     29500,
     "tcp://127.0.0.1:29500",
     "torchrun"},
    {"TorchrunWithoutLocalVarsIsOneNode",
     {{"RANK", "3"}, {"WORLD_SIZE", "4"}},
     3,
     4,
     3,
     4,
     "127.0.0.1",
     29500,
     "tcp://127.0.0.1:29500",
     "torchrun"},
    {"Ipv6MasterAddrIsBracketed",
     {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "fe80::1"}, {"MASTER_PORT", "7"}},
     0,
     2,
     0,
     2,
     "fe80::1",
     7,
     "tcp://[fe80::1]:7",
     "torchrun"},
    {"SizeOneUsesMemory",
     {{"RANK", "0"}, {"WORLD_SIZE", "1"}},
     0,
     1,
     0,
     1,
     "127.0.0.1",
     29500,
     "memory:",
     "torchrun"},
    {"EmptyMasterAddrCountsAsUnset",
     {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", ""}},
     0,
     2,
     0,
     2,
     "127.0.0.1",
     29500,
     "tcp://127.0.0.1:29500",
     "torchrun"},
    {"SlurmNtasksPerNode",
     {{"SLURM_PROCID", "3"},
      {"SLURM_NTASKS", "8"},
      {"SLURM_LOCALID", "3"},
      {"SLURM_NTASKS_PER_NODE", "4"},
      {"SLURM_NNODES", "2"},
      {"MASTER_ADDR", "n0"}},
     3,
     8,
     3,
     4,
     "n0",
     29500,
     "tcp://n0:29500",
     "slurm"},
    {"SlurmTasksPerNodeFirstNumber",
     {{"SLURM_PROCID", "6"},
      {"SLURM_NTASKS", "8"},
      {"SLURM_LOCALID", "2"},
      {"SLURM_TASKS_PER_NODE", "4(x2)"},
      {"SLURM_NNODES", "2"},
      {"MASTER_ADDR", "n0"}},
     6,
     8,
     2,
     4,
     "n0",
     29500,
     "tcp://n0:29500",
     "slurm"},
    {"SlurmTasksPerNodeOfThisNode",
     {{"SLURM_PROCID", "4"},
      {"SLURM_NTASKS", "5"},
      {"SLURM_LOCALID", "1"},
      {"SLURM_TASKS_PER_NODE", "3,2"},
      {"SLURM_NODEID", "1"},
      {"MASTER_ADDR", "n0"}},
     4,
     5,
     1,
     2,
     "n0",
     29500,
     "tcp://n0:29500",
     "slurm"},
    {"SlurmTasksPerNodeWithoutNodeIdTakesTheFirst",
     {{"SLURM_PROCID", "1"},
      {"SLURM_NTASKS", "7"},
      {"SLURM_LOCALID", "1"},
      {"SLURM_TASKS_PER_NODE", "2(x3),1"},
      {"MASTER_ADDR", "n0"}},
     1,
     7,
     1,
     2,
     "n0",
     29500,
     "tcp://n0:29500",
     "slurm"},
    {"SlurmOneNode",
     {{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "4"}, {"SLURM_NNODES", "1"}},
     2,
     4,
     2,
     4,
     "127.0.0.1",
     29500,
     "tcp://127.0.0.1:29500",
     "slurm"},
    {"OpenMpi",
     {{"OMPI_COMM_WORLD_RANK", "2"},
      {"OMPI_COMM_WORLD_SIZE", "4"},
      {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
      {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
      {"MASTER_ADDR", "h"},
      {"MASTER_PORT", "4000"}},
     2,
     4,
     0,
     2,
     "h",
     4000,
     "tcp://h:4000",
     "openmpi"},
    {"OpenMpiOneNode",
     {{"OMPI_COMM_WORLD_RANK", "1"},
      {"OMPI_COMM_WORLD_SIZE", "2"},
      {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
      {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}},
     1,
     2,
     1,
     2,
     "127.0.0.1",
     29500,
     "tcp://127.0.0.1:29500",
     "openmpi"},
    {"TorchrunWinsOverSlurmAndOpenMpi",
     {{"RANK", "1"},
      {"WORLD_SIZE", "2"},
      {"SLURM_PROCID", "0"},
      {"SLURM_NTASKS", "1"},
      {"OMPI_COMM_WORLD_RANK", "0"},
      {"OMPI_COMM_WORLD_SIZE", "1"}},
     1,
     2,
     1,
     2,
     "127.0.0.1",
     29500,
     "tcp://127.0.0.1:29500",
     "torchrun"},
    {"OpenMpiWinsOverTheEnclosingSlurmStep",
     {{"SLURM_PROCID", "0"},
      {"SLURM_NTASKS", "1"},
      {"SLURM_NNODES", "1"},
      {"OMPI_COMM_WORLD_RANK", "3"},
      {"OMPI_COMM_WORLD_SIZE", "4"},
      {"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
      {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}},
     3,
     4,
     3,
     4,
     "127.0.0.1",
     29500,
     "tcp://127.0.0.1:29500",
     "openmpi"},
};

INSTANTIATE_TEST_SUITE_P(Launchers, EnvGoodTest, ::testing::ValuesIn(kGoodCases),
                         [](const auto& p) { return std::string(p.param.name); });

// ---- Other settings ----------------------------------------------------------------------

TEST(EnvSettingsTest, TimeoutBackendTokenFromEnvironment) {
  auto config =
      resolve_group_config(nullptr, lookup_of(with(kTwoRanks, {{"PROCGROUP_TIMEOUT", "0.5"},
                                                               {"PROCGROUP_BACKEND", "gloo"},
                                                               {"PROCGROUP_STORE_TOKEN", "tok"}})));
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->timeout, Millis(500));
  EXPECT_EQ(config->backend, "gloo");
  EXPECT_EQ(config->store_token, "tok");
  EXPECT_EQ(config->device_type, -1);
}

TEST(EnvSettingsTest, Defaults) {
  auto config = resolve_group_config(nullptr, lookup_of(kTwoRanks));
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->timeout, Millis(300000));
  EXPECT_EQ(config->backend, "");
  EXPECT_EQ(config->store_token, "");
  EXPECT_EQ(config->name, "world");
  auto whole =
      resolve_group_config(nullptr, lookup_of(with(kTwoRanks, {{"PROCGROUP_TIMEOUT", "2"}})));
  EXPECT_EQ(whole->timeout, Millis(2000));
}

TEST(EnvSettingsTest, ProcessEnvReadsTheRealEnvironment) {
  ASSERT_EQ(::setenv("PROCGROUP_ENV_TEST_VARIABLE", "value 1", 1), 0);
  EnvLookup env = process_env();
  EXPECT_EQ(env("PROCGROUP_ENV_TEST_VARIABLE"), "value 1");
  ::unsetenv("PROCGROUP_ENV_TEST_VARIABLE");
  EXPECT_EQ(env("PROCGROUP_ENV_TEST_VARIABLE"), std::nullopt);
}

}  // namespace
}  // namespace procgroup::detail
