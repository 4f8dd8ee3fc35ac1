// resolve_group_config() under torchrun's default launch: TORCHELASTIC_USE_AGENT_STORE=True
// makes every rank a client of the agent's c10d store (keys per restart attempt), and only
// torch's exact spelling does; an explicit store_url, a single rank or a token say otherwise.
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

// What torchrun's agent gives a worker of a two-rank job on one node.
const Vars kAgent = with(kTwoRanks, {{"MASTER_ADDR", "10.0.0.1"},
                                     {"MASTER_PORT", "29501"},
                                     {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                     {"TORCHELASTIC_RESTART_COUNT", "0"}});

Result<GroupConfig> resolve(const Vars& env, const pg_group_options_t* options = nullptr) {
  return resolve_group_config(options, lookup_of(env));
}

TEST(EnvAgentStoreTest, JoinsTheAgentsStoreUnderTheAttemptsPrefix) {
  auto config = resolve(kAgent);
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->store_url, "c10d://10.0.0.1:29501/procgroup/attempt_0/?agent");
  EXPECT_EQ(config->master_addr, "10.0.0.1");
  EXPECT_EQ(config->master_port, 29501);
  EXPECT_EQ(config->launcher, "torchrun");

  auto restarted = resolve(with(kAgent, {{"TORCHELASTIC_RESTART_COUNT", "3"}}));
  ASSERT_TRUE(restarted.ok()) << restarted.status().to_string();
  EXPECT_EQ(restarted->store_url, "c10d://10.0.0.1:29501/procgroup/attempt_3/?agent");

  Vars no_count = kAgent;
  no_count.erase("TORCHELASTIC_RESTART_COUNT");
  EXPECT_EQ(resolve(no_count)->store_url, "c10d://10.0.0.1:29501/procgroup/attempt_0/?agent");
}

TEST(EnvAgentStoreTest, Ipv6MasterAddrGetsBrackets) {
  auto config = resolve(with(kAgent, {{"MASTER_ADDR", "fd00::2"}}));
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->store_url, "c10d://[fd00::2]:29501/procgroup/attempt_0/?agent");
}

TEST(EnvAgentStoreTest, OnlyTorchsExactTrueCounts) {
  // torch tests == "True"; "False" is what --standalone's agent sets.
  for (const char* value : {"False", "true", "1", "TRUE", ""}) {
    auto config = resolve(with(kAgent, {{"TORCHELASTIC_USE_AGENT_STORE", value}}));
    ASSERT_TRUE(config.ok()) << value << ": " << config.status().to_string();
    EXPECT_EQ(config->store_url, "tcp://10.0.0.1:29501") << value;
  }
  Vars unset = kAgent;
  unset.erase("TORCHELASTIC_USE_AGENT_STORE");
  EXPECT_EQ(resolve(unset)->store_url, "tcp://10.0.0.1:29501");
}

TEST(EnvAgentStoreTest, AnExplicitStoreUrlWins) {
  pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
  o.store_url = "tcp://127.0.0.1:4000";
  auto config = resolve(kAgent, &o);
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->store_url, "tcp://127.0.0.1:4000");

  o.store_url = "file:///tmp/job";
  o.store_token = "a-token";  // our own stores check tokens: no conflict
  EXPECT_EQ(resolve(kAgent, &o)->store_url, "file:///tmp/job");
}

TEST(EnvAgentStoreTest, ExplicitMasterOptionsAreTheAgentsAddress) {
  pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
  o.master_addr = "127.0.0.1";
  o.master_port = 4242;
  auto config = resolve(kAgent, &o);
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->store_url, "c10d://127.0.0.1:4242/procgroup/attempt_0/?agent");
}

TEST(EnvAgentStoreTest, OneRankNeedsNoStore) {
  auto config = resolve(with(kAgent, {{"RANK", "0"}, {"WORLD_SIZE", "1"}}));
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  EXPECT_EQ(config->store_url, "memory:");
}

TEST(EnvAgentStoreTest, ATokenIsRefusedSayingWhy) {
  auto from_env = resolve(with(kAgent, {{"PROCGROUP_STORE_TOKEN", "secret"}}));
  ASSERT_FALSE(from_env.ok());
  EXPECT_EQ(from_env.status().code(), PG_ERR_CONFIG);
  EXPECT_THAT(from_env.status().message(), HasSubstr("PROCGROUP_STORE_TOKEN"));
  EXPECT_THAT(from_env.status().message(), HasSubstr("TORCHELASTIC_USE_AGENT_STORE=True"));
  EXPECT_THAT(from_env.status().message(), HasSubstr("cannot check a token"));

  pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
  o.store_token = "from-options";
  auto from_options = resolve(kAgent, &o);
  ASSERT_FALSE(from_options.ok());
  EXPECT_EQ(from_options.status().code(), PG_ERR_CONFIG);
}

TEST(EnvAgentStoreTest, MalformedRestartCountNamesTheVariable) {
  for (const char* value : {"x", "-1", "1.5", "2 "}) {
    auto config = resolve(with(kAgent, {{"TORCHELASTIC_RESTART_COUNT", value}}));
    ASSERT_FALSE(config.ok()) << value;
    EXPECT_EQ(config.status().code(), PG_ERR_CONFIG);
    EXPECT_THAT(config.status().message(), HasSubstr("TORCHELASTIC_RESTART_COUNT"));
  }
}

}  // namespace
}  // namespace procgroup::detail
