// resolve_group_config() with malformed or incomplete launcher environments: each is
// PG_ERR_CONFIG whose message names the variable at fault (and the launcher that sets it).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "env_test_util.h"
#include "rendezvous/env.h"

namespace procgroup::detail {
namespace {

using env_testing::kTwoRanks;
using env_testing::lookup_of;
using env_testing::Vars;
using env_testing::with;
using ::testing::HasSubstr;

struct BadCase {
  const char* name;
  Vars env;
  std::vector<const char*> message_has;  // the variable at fault, and who sets it
};
void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

class EnvBadTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(EnvBadTest, IsAConfigErrorNamingTheVariable) {
  const BadCase& c = GetParam();
  auto config = resolve_group_config(nullptr, lookup_of(c.env));
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), PG_ERR_CONFIG) << config.status().to_string();
  for (const char* text : c.message_has) {
    EXPECT_THAT(config.status().message(), HasSubstr(text));
  }
}

const BadCase kBadCases[] = {
    {"NothingSet", {}, {"RANK", "WORLD_SIZE", "srun", "mpirun"}},
    {"RankWithoutWorldSize", {{"RANK", "1"}}, {"WORLD_SIZE", "torchrun"}},
    {"WorldSizeWithoutRank", {{"WORLD_SIZE", "2"}}, {"RANK", "torchrun"}},
    {"RankNotANumber", {{"RANK", "x"}, {"WORLD_SIZE", "2"}}, {"RANK='x'", "torchrun"}},
    {"WorldSizeTrailingText", {{"RANK", "1"}, {"WORLD_SIZE", "2abc"}}, {"WORLD_SIZE='2abc'"}},
    {"RankWithSpace", {{"RANK", " 1"}, {"WORLD_SIZE", "2"}}, {"RANK"}},
    {"RankEmpty", {{"RANK", ""}, {"WORLD_SIZE", "2"}}, {"RANK"}},
    {"RankOverflow", {{"RANK", "99999999999"}, {"WORLD_SIZE", "2"}}, {"RANK"}},
    {"WorldSizeAboveInt32",
     {{"RANK", "0"}, {"WORLD_SIZE", "2147483648"}},
     {"WORLD_SIZE='2147483648' is outside -2147483648..2147483647"}},
    {"RankEqualsSize", {{"RANK", "2"}, {"WORLD_SIZE", "2"}}, {"RANK=2", "WORLD_SIZE=2"}},
    {"RankNegative", {{"RANK", "-1"}, {"WORLD_SIZE", "2"}}, {"RANK=-1"}},
    {"WorldSizeZero", {{"RANK", "0"}, {"WORLD_SIZE", "0"}}, {"WORLD_SIZE=0"}},
    {"LocalRankWithoutLocalSize",
     with(kTwoRanks, {{"LOCAL_RANK", "0"}}),
     {"LOCAL_WORLD_SIZE", "torchrun"}},
    {"LocalSizeWithoutLocalRank", with(kTwoRanks, {{"LOCAL_WORLD_SIZE", "2"}}), {"LOCAL_RANK"}},
    {"LocalRankOutOfRange",
     with(kTwoRanks, {{"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}}),
     {"LOCAL_RANK=2"}},
    {"LocalSizeAboveSize",
     with(kTwoRanks, {{"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "3"}}),
     {"LOCAL_WORLD_SIZE=3"}},
    {"MultiNodeWithoutMasterAddr",
     {{"RANK", "0"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "4"}},
     {"MASTER_ADDR"}},
    {"MasterPortNotANumber", with(kTwoRanks, {{"MASTER_PORT", "http"}}), {"MASTER_PORT"}},
    {"MasterPortZero", with(kTwoRanks, {{"MASTER_PORT", "0"}}), {"MASTER_PORT=0"}},
    {"MasterPortTooLarge", with(kTwoRanks, {{"MASTER_PORT", "70000"}}), {"MASTER_PORT=70000"}},
    {"TimeoutNotANumber", with(kTwoRanks, {{"PROCGROUP_TIMEOUT", "5m"}}), {"PROCGROUP_TIMEOUT"}},
    {"TimeoutZero", with(kTwoRanks, {{"PROCGROUP_TIMEOUT", "0"}}), {"PROCGROUP_TIMEOUT"}},
    {"TimeoutNegative", with(kTwoRanks, {{"PROCGROUP_TIMEOUT", "-1"}}), {"PROCGROUP_TIMEOUT"}},
    {"TimeoutInfinite", with(kTwoRanks, {{"PROCGROUP_TIMEOUT", "inf"}}), {"PROCGROUP_TIMEOUT"}},
    {"TimeoutNan", with(kTwoRanks, {{"PROCGROUP_TIMEOUT", "nan"}}), {"PROCGROUP_TIMEOUT"}},
    {"TimeoutEmpty", with(kTwoRanks, {{"PROCGROUP_TIMEOUT", ""}}), {"PROCGROUP_TIMEOUT"}},
    {"TimeoutHuge", with(kTwoRanks, {{"PROCGROUP_TIMEOUT", "1e20"}}), {"PROCGROUP_TIMEOUT"}},
    // A number, but too long: said so, not "not a positive number".
    {"TimeoutAboveTheLongest",
     with(kTwoRanks, {{"PROCGROUP_TIMEOUT", "1e12"}}),
     {"PROCGROUP_TIMEOUT='1e12' is longer than the longest timeout, 1000000000 seconds"}},
    {"TimeoutBeyondDouble",
     with(kTwoRanks, {{"PROCGROUP_TIMEOUT", "1e999"}}),
     {"longer than the longest timeout"}},
    {"TimeoutBelowDouble",
     with(kTwoRanks, {{"PROCGROUP_TIMEOUT", "1e-999"}}),
     {"'1e-999' is not a positive number"}},
    {"SlurmProcidWithoutNtasks", {{"SLURM_PROCID", "0"}}, {"SLURM_NTASKS", "srun"}},
    {"SlurmNtasksWithoutProcid", {{"SLURM_NTASKS", "4"}}, {"SLURM_PROCID", "srun"}},
    {"SlurmMultiNodeWithoutTasksPerNode",
     {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"}, {"SLURM_NNODES", "2"}},
     {"SLURM_TASKS_PER_NODE"}},
    {"SlurmTasksPerNodeMalformed",
     {{"SLURM_PROCID", "0"},
      {"SLURM_NTASKS", "4"},
      {"SLURM_LOCALID", "0"},
      {"SLURM_TASKS_PER_NODE", "4(x"}},
     {"SLURM_TASKS_PER_NODE='4(x'"}},
    {"SlurmMultiNodeWithoutLocalId",
     {{"SLURM_PROCID", "0"},
      {"SLURM_NTASKS", "4"},
      {"SLURM_TASKS_PER_NODE", "2(x2)"},
      {"MASTER_ADDR", "n0"}},
     {"SLURM_LOCALID", "srun"}},
    {"SlurmNodesZero",
     {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_NNODES", "0"}},
     {"SLURM_NNODES"}},
    {"SlurmProcidOutOfRange",
     {{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}, {"SLURM_NNODES", "1"}},
     {"SLURM_PROCID=4"}},
    {"SlurmMultiNodeWithoutMasterAddr",
     {{"SLURM_PROCID", "0"},
      {"SLURM_NTASKS", "4"},
      {"SLURM_LOCALID", "0"},
      {"SLURM_NTASKS_PER_NODE", "2"},
      {"SLURM_NNODES", "2"}},
     {"MASTER_ADDR", "scontrol"}},
    {"OpenMpiRankWithoutSize", {{"OMPI_COMM_WORLD_RANK", "0"}}, {"OMPI_COMM_WORLD_SIZE", "mpirun"}},
    {"OpenMpiRankOutOfRange",
     {{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "4"}},
     {"OMPI_COMM_WORLD_RANK=5"}},
    {"OpenMpiLocalSizeMalformed",
     {{"OMPI_COMM_WORLD_RANK", "0"},
      {"OMPI_COMM_WORLD_SIZE", "4"},
      {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
      {"OMPI_COMM_WORLD_LOCAL_SIZE", "two"}},
     {"OMPI_COMM_WORLD_LOCAL_SIZE='two'"}},
};

INSTANTIATE_TEST_SUITE_P(Launchers, EnvBadTest, ::testing::ValuesIn(kBadCases),
                         [](const auto& p) { return std::string(p.param.name); });

// A 100 KB value is quoted by its start and its length, not whole.
TEST(EnvMessages, QuoteLongValuesCutShort) {
  const std::string huge(100000, '7');
  for (const char* name : {"WORLD_SIZE", "PROCGROUP_TIMEOUT", "PROCGROUP_DEBUG"}) {
    Vars env = with(kTwoRanks, {{name, huge + "x"}});
    auto config = resolve_group_config(nullptr, lookup_of(env));
    ASSERT_FALSE(config.ok()) << name;
    const std::string& message = config.status().message();
    EXPECT_LT(message.size(), 300u) << message;
    EXPECT_THAT(message, HasSubstr(name));
    EXPECT_THAT(message, HasSubstr("'" + huge.substr(0, 100) + "'... (100001 bytes)"));
  }
}

TEST(EnvMessages, QuoteControlCharactersEscaped) {
  auto config = resolve_group_config(nullptr, lookup_of(with(kTwoRanks, {{"RANK", "1\n\x1b[2J"}})));
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("RANK='1\\x0a\\x1b[2J'"));
}

}  // namespace
}  // namespace procgroup::detail
