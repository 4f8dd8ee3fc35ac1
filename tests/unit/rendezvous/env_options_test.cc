// resolve_group_config() with explicit pg_group_options_t: options win over the
// environment, and bad option values are PG_ERR_INVALID_ARGUMENT naming the field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>

#include "env_test_util.h"
#include "rendezvous/env.h"

namespace procgroup::detail {
namespace {

using env_testing::lookup_of;
using env_testing::Vars;
using ::testing::HasSubstr;

// An environment that disagrees with every option, to prove the options win.
const Vars kNoisyEnv = {{"RANK", "0"},
                        {"WORLD_SIZE", "2"},
                        {"LOCAL_RANK", "0"},
                        {"LOCAL_WORLD_SIZE", "2"},
                        {"MASTER_ADDR", "env-host"},
                        {"MASTER_PORT", "1111"},
                        {"PROCGROUP_BACKEND", "env-backend"},
                        {"PROCGROUP_STORE_TOKEN", "env-token"},
                        {"PROCGROUP_TIMEOUT", "9"}};

pg_group_options_t options(int rank, int size) {
  pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
  o.rank = rank;
  o.size = size;
  return o;
}

TEST(EnvOptionsTest, OptionsOverrideTheEnvironment) {
  pg_group_options_t o = options(2, 4);
  o.local_rank = 0;
  o.local_size = 2;
  o.master_addr = "opt-host";
  o.master_port = 2222;
  o.backend = "loopback";
  o.store_token = "opt-token";
  o.timeout_ms = 1500;
  o.device_type = PG_DEVICE_CUDA;
  o.name = "sub";
  auto config = resolve_group_config(&o, lookup_of(kNoisyEnv));
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->rank, 2);
  EXPECT_EQ(config->size, 4);
  EXPECT_EQ(config->local_rank, 0);
  EXPECT_EQ(config->local_size, 2);
  EXPECT_EQ(config->master_addr, "opt-host");
  EXPECT_EQ(config->master_port, 2222);
  EXPECT_EQ(config->store_url, "tcp://opt-host:2222");
  EXPECT_EQ(config->backend, "loopback");
  EXPECT_EQ(config->store_token, "opt-token");
  EXPECT_EQ(config->timeout, Millis(1500));
  EXPECT_EQ(config->device_type, PG_DEVICE_CUDA);
  EXPECT_EQ(config->name, "sub");
  EXPECT_EQ(config->launcher, "options");
}

TEST(EnvOptionsTest, UnsetOptionFieldsFallBackToTheEnvironment) {
  pg_group_options_t o = options(1, 3);
  auto config = resolve_group_config(&o, lookup_of(kNoisyEnv));
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->rank, 1);
  EXPECT_EQ(config->size, 3);
  EXPECT_EQ(config->local_rank, 1);  // local_size 0: one node, local rank = rank
  EXPECT_EQ(config->local_size, 3);
  EXPECT_EQ(config->master_addr, "env-host");
  EXPECT_EQ(config->master_port, 1111);
  EXPECT_EQ(config->backend, "env-backend");
  EXPECT_EQ(config->store_token, "env-token");
  EXPECT_EQ(config->timeout, Millis(9000));
}

TEST(EnvOptionsTest, SizeZeroTakesRankFromTheEnvironmentButKeepsOtherOptions) {
  pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
  o.master_addr = "opt-host";
  auto config = resolve_group_config(&o, lookup_of(kNoisyEnv));
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->launcher, "torchrun");
  EXPECT_EQ(config->size, 2);
  EXPECT_EQ(config->master_addr, "opt-host");
}

TEST(EnvOptionsTest, ExplicitSizeIgnoresMalformedLauncherVariables) {
  pg_group_options_t o = options(0, 1);
  auto config = resolve_group_config(&o, lookup_of({{"RANK", "garbage"}}));
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->store_url, "memory:");
}

TEST(EnvOptionsTest, ExplicitStoreUrlWins) {
  pg_group_options_t o = options(0, 8);
  o.local_size = 4;
  o.store_url = "tcp://[::1]:5000";
  auto config = resolve_group_config(&o, lookup_of({}));
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->store_url, "tcp://[::1]:5000");
  EXPECT_EQ(config->master_addr, "::1");  // taken from the URL: no MASTER_ADDR needed
  o.store_url = "file:///tmp/x";
  o.local_size = 0;
  config = resolve_group_config(&o, lookup_of({}));
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->store_url, "file:///tmp/x");
  EXPECT_EQ(config->master_addr, "127.0.0.1");
}

TEST(EnvOptionsTest, OlderCallersShorterStructIsHonoured) {
  pg_group_options_t o = options(0, 2);
  o.name = "beyond the caller's struct";
  o.struct_size = offsetof(pg_group_options_t, master_port) + sizeof(int32_t);
  auto config = resolve_group_config(&o, lookup_of({}));
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->name, "world");
  EXPECT_EQ(config->size, 2);
}

struct BadOption {
  const char* name;
  void (*mutate)(pg_group_options_t&);
  const char* field;
};
void PrintTo(const BadOption& c, std::ostream* os) { *os << c.name; }

class EnvBadOptionTest : public ::testing::TestWithParam<BadOption> {};

TEST_P(EnvBadOptionTest, IsAnInvalidArgumentNamingTheField) {
  pg_group_options_t o = options(0, 4);
  GetParam().mutate(o);
  auto config = resolve_group_config(&o, lookup_of(kNoisyEnv));
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), PG_ERR_INVALID_ARGUMENT) << config.status().to_string();
  EXPECT_THAT(config.status().message(), HasSubstr(GetParam().field));
}

const BadOption kBadOptions[] = {
    {"RankEqualsSize", [](pg_group_options_t& o) { o.rank = 4; }, "rank"},
    {"RankNegative", [](pg_group_options_t& o) { o.rank = -1; }, "rank"},
    {"SizeNegative", [](pg_group_options_t& o) { o.size = -2; }, "size"},
    {"LocalSizeAboveSize", [](pg_group_options_t& o) { o.local_size = 5; }, "local_size"},
    {"LocalSizeNegative", [](pg_group_options_t& o) { o.local_size = -1; }, "local_size"},
    {"LocalRankOutOfRange",
     [](pg_group_options_t& o) {
       o.local_size = 2;
       o.local_rank = 2;
     },
     "local_rank"},
    {"PortTooLarge", [](pg_group_options_t& o) { o.master_port = 70000; }, "master_port"},
    {"PortNegative", [](pg_group_options_t& o) { o.master_port = -1; }, "master_port"},
    {"TimeoutNegative", [](pg_group_options_t& o) { o.timeout_ms = -5; }, "timeout_ms"},
    // Beyond ~31 years a deadline would overflow: refused, not wrapped.
    {"TimeoutBeyondTheLongest", [](pg_group_options_t& o) { o.timeout_ms = INT64_MAX; },
     "is longer than the longest timeout, 1000000000000 ms"},
    {"DeviceTypeUnknown", [](pg_group_options_t& o) { o.device_type = 9; }, "device_type"},
    {"StructSizeZero", [](pg_group_options_t& o) { o.struct_size = 0; }, "struct_size"},
};

INSTANTIATE_TEST_SUITE_P(Options, EnvBadOptionTest, ::testing::ValuesIn(kBadOptions),
                         [](const auto& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace procgroup::detail
