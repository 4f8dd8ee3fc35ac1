// The torchrun env:// variables pgrun gives each rank, and the free MASTER_PORT.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "subprocess.h"

namespace procgroup::testing {
namespace {

using RankEnv = std::map<int, std::map<std::string, std::string>>;

// Parses "[rank R] KEY=VALUE" lines from the probe's "env" action.
RankEnv parse_env(const std::string& out) {
  RankEnv env;
  const std::regex line_re(R"(^\[rank (\d+)\] ([A-Z_]+)=(.*)$)");
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_match(line, m, line_re)) env[std::stoi(m[1])][m[2]] = m[3];
  }
  return env;
}

TEST(PgrunEnv, SetsTorchrunVariablesForEachRankOfThisNode) {
  // A RANK already in pgrun's environment must be replaced; other variables inherited.
  const ProcessResult r =
      run({PGRUN_PATH, "--nproc-per-node", "2", "--nnodes", "2", "--node-rank", "1",
           "--master-addr", "10.1.2.3", "--master-port", "29555", PGRUN_PROBE_PATH, "env"},
          30, {"RANK=99", "PGRUN_TEST_INHERITED=kept"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const RankEnv env = parse_env(r.out);
  ASSERT_EQ(env.size(), 2u) << r.out;
  for (int local = 0; local < 2; ++local) {
    const int rank = 2 + local;
    ASSERT_EQ(env.count(rank), 1u) << r.out;
    const auto& e = env.at(rank);
    EXPECT_EQ(e.at("RANK"), std::to_string(rank));
    EXPECT_EQ(e.at("LOCAL_RANK"), std::to_string(local));
    EXPECT_EQ(e.at("WORLD_SIZE"), "4");
    EXPECT_EQ(e.at("LOCAL_WORLD_SIZE"), "2");
    EXPECT_EQ(e.at("GROUP_RANK"), "1");
    EXPECT_EQ(e.at("NODE_RANK"), "1");
    EXPECT_EQ(e.at("MASTER_ADDR"), "10.1.2.3");
    EXPECT_EQ(e.at("MASTER_PORT"), "29555");
    EXPECT_EQ(e.at("PGRUN_TEST_INHERITED"), "kept");
  }
}

TEST(PgrunEnv, AcceptsTorchrunUnderscoreSpellings) {
  const ProcessResult r =
      run({PGRUN_PATH, "--nproc_per_node=3", "--nnodes=2", "--node_rank=0",
           "--master_addr=node0.example", "--master_port=1234", PGRUN_PROBE_PATH, "env"},
          30);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const RankEnv env = parse_env(r.out);
  ASSERT_EQ(env.size(), 3u) << r.out;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(env.at(rank).at("RANK"), std::to_string(rank));
    EXPECT_EQ(env.at(rank).at("WORLD_SIZE"), "6");
    EXPECT_EQ(env.at(rank).at("NODE_RANK"), "0");
    EXPECT_EQ(env.at(rank).at("MASTER_ADDR"), "node0.example");
    EXPECT_EQ(env.at(rank).at("MASTER_PORT"), "1234");
  }
}

void expect_one_free_port(const RankEnv& env, int world_size) {
  ASSERT_EQ(env.size(), static_cast<std::size_t>(world_size));
  const std::string port = env.at(0).at("MASTER_PORT");
  for (const auto& [rank, e] : env) {
    EXPECT_EQ(e.at("MASTER_PORT"), port) << "rank " << rank;
    EXPECT_EQ(e.at("MASTER_ADDR"), "127.0.0.1");
    EXPECT_EQ(e.at("WORLD_SIZE"), std::to_string(world_size));
    EXPECT_EQ(e.at("NODE_RANK"), "0");
  }
  const int number = std::stoi(port);
  ASSERT_GT(number, 0);
  ASSERT_LE(number, 65535);
  // pgrun released the port: rank 0 could bind it (SO_REUSEADDR as a TCP store would).
  const int sock = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(sock, 0);
  const int one = 1;
  ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(number));
  EXPECT_EQ(::bind(sock, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(sock);
}

TEST(PgrunEnv, PicksOneFreePortForAllRanksWhenNoneIsGiven) {
  const ProcessResult r = run({PGRUN_PATH, "--nproc-per-node", "3", PGRUN_PROBE_PATH, "env"}, 30);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_one_free_port(parse_env(r.out), 3);
}

TEST(PgrunEnv, StandaloneIsASingleNodeWithAFreePort) {
  const ProcessResult r =
      run({PGRUN_PATH, "--standalone", "--nproc_per_node", "2", PGRUN_PROBE_PATH, "env"}, 30);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_one_free_port(parse_env(r.out), 2);
}

}  // namespace
}  // namespace procgroup::testing
