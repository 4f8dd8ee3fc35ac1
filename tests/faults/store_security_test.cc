// Store security end to end (DESIGN.md §5): pgrun hands each single-node job a fresh
// secret token (never printed); ranks with another token are refused with PG_ERR_AUTH; the
// store listens on MASTER_ADDR only; and a real job rendezvouses and runs collectives
// while hostile clients flood its store. (tests/unit/store covers each hostile input
// against the server alone, and the key and connection limits.)
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include "fault_run.h"
#include "store_flood.h"

namespace procgroup::testing {
namespace {

bool can_connect(const char* host, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, host, &addr.sin_addr);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

// The tokens the ranks saw, one per rank, from `echo TOKEN=[...]`.
std::vector<std::string> tokens_seen(const std::vector<std::string>& pgrun_args,
                                     const std::vector<std::string>& env, std::string* err) {
  std::vector<std::string> argv{pgrun_path(), "--nproc-per-node", "2"};
  argv.insert(argv.end(), pgrun_args.begin(), pgrun_args.end());
  argv.insert(argv.end(), {"/bin/sh", "-c", "echo \"TOKEN=[$PROCGROUP_STORE_TOKEN]\""});
  ProcessResult r = run(argv, 30, env);
  *err = r.err;
  std::vector<std::string> seen;
  const std::regex line(R"(TOKEN=\[([^\]]*)\])");
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), line), end; it != end; ++it) {
    seen.push_back((*it)[1]);
  }
  return seen;
}

TEST(StoreToken, PgrunGivesEachSingleNodeJobAFreshSecretItNeverPrints) {
  std::string err1, err2;
  const auto first = tokens_seen({}, {"PROCGROUP_STORE_TOKEN="}, &err1);
  const auto second = tokens_seen({}, {"PROCGROUP_STORE_TOKEN="}, &err2);
  ASSERT_EQ(first.size(), 2u);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_TRUE(std::regex_match(first[0], std::regex("[0-9a-f]{64}"))) << first[0];
  EXPECT_EQ(first[0], first[1]) << "every rank of a job has the same token";
  EXPECT_NE(first[0], second[0]) << "every job has its own";
  EXPECT_EQ(err1.find(first[0]), std::string::npos) << "pgrun must never print it";
  EXPECT_EQ(err1, "");
}

TEST(StoreToken, ATokenInTheEnvironmentIsPassedThroughAndOffGeneratesNone) {
  std::string err;
  auto given = tokens_seen({}, {"PROCGROUP_STORE_TOKEN=s3cret"}, &err);
  ASSERT_EQ(given.size(), 2u);
  EXPECT_EQ(given[0], "s3cret");
  auto off = tokens_seen({"--store-token", "off"}, {"PROCGROUP_STORE_TOKEN="}, &err);
  ASSERT_EQ(off.size(), 2u);
  EXPECT_EQ(off[0], "");
  // Several nodes cannot agree on a generated token: none, and pgrun says so.
  auto multi = tokens_seen({"--nnodes", "2", "--node-rank", "0", "--master-port", "29999"},
                           {"PROCGROUP_STORE_TOKEN="}, &err);
  ASSERT_EQ(multi.size(), 2u);
  EXPECT_EQ(multi[0], "");
  EXPECT_NE(err.find("PROCGROUP_STORE_TOKEN"), std::string::npos) << err;
}

// Two ranks started by hand, each with its own token: the one that is not rank 0 is refused.
TEST(StoreToken, ARankWithAnotherTokenIsRefusedWithoutSeeingEitherToken) {
  const std::string port = std::to_string(free_port());
  std::vector<std::unique_ptr<Subprocess>> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(std::make_unique<Subprocess>(
        std::vector<std::string>{fault_worker_path(), "healthy"},
        std::vector<std::string>{
            "RANK=" + std::to_string(r), "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1",
            "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port, "PROCGROUP_TIMEOUT=4",
            "PROCGROUP_BACKEND=gloo",
            std::string("PROCGROUP_STORE_TOKEN=") + (r ? "tokenB" : "tokenA")}));
  }
  ProcessResult r1 = ranks[1]->wait(30);
  ProcessResult r0 = ranks[0]->wait(30);
  FaultRun run1 = parse_run(r1);
  const WorkerLine* res = run1.find("RESULT", 1);
  ASSERT_NE(res, nullptr) << r1.out << r1.err;
  EXPECT_EQ(res->field("status"), "PG_ERR_AUTH") << res->msg;
  EXPECT_NE(res->msg.find("PROCGROUP_STORE_TOKEN"), std::string::npos) << res->msg;
  for (const std::string& text : {r1.out + r1.err, r0.out + r0.err}) {
    EXPECT_EQ(text.find("tokenA"), std::string::npos) << text;
    EXPECT_EQ(text.find("tokenB"), std::string::npos) << text;
  }
  EXPECT_NE(r0.exit_code, 0) << "rank 0 cannot complete the group alone";
}

// MASTER_ADDR=127.0.0.2: the store answers there and not on 127.0.0.1 (same port).
TEST(StoreBinding, TheStoreListensOnMasterAddrOnly) {
  const int port = free_port();
  Subprocess rank0(
      {fault_worker_path(), "healthy"},
      {"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1", "MASTER_ADDR=127.0.0.2",
       "MASTER_PORT=" + std::to_string(port), "PROCGROUP_TIMEOUT=10", "PROCGROUP_BACKEND=gloo"});
  bool up = false;
  for (int i = 0; i < 200 && !up; ++i) {
    up = can_connect("127.0.0.2", port);
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_TRUE(up) << "rank 0's store never listened on 127.0.0.2:" << port;
  EXPECT_FALSE(can_connect("127.0.0.1", port)) << "the store is reachable on another address";
  ::kill(rank0.pid(), SIGKILL);
}

// A real job (token from pgrun) rendezvouses, runs 3000 checked allreduces and leaves while
// hostile clients keep hitting its store. Halfway the ranks wait until the store has answered
// some hostile frames: a fast job could otherwise end before the flood got any answer.
TEST(StoreFloodTest, ARealJobCompletesWhileHostileClientsFloodItsStore) {
  for (const std::string& backend : process_backends()) {
    SCOPED_TRACE(backend);
    const int port = free_port();
    TempDir dir;
    const std::string go_on = dir.str() + "/go_on";
    StoreFlood flood("127.0.0.1", port, 6);
    std::thread release([&flood, &go_on] {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (flood.rejected() <= 5 && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (FILE* f = std::fopen(go_on.c_str(), "w")) std::fclose(f);
    });
    RunSpec spec;
    spec.backend = backend;
    spec.nproc = 3;
    spec.timeout_s = 30;
    spec.pgrun_args = {"--master-port", std::to_string(port)};
    spec.args = {"healthy", "--iters", "3000", "--cut-file", go_on};
    spec.env = {"PROCGROUP_STORE_TOKEN="};
    FaultRun run = run_workers(spec);
    release.join();
    StoreFlood::Counts counts = flood.stop();
    SCOPED_TRACE(run.log());
    EXPECT_EQ(run.pgrun.exit_code, 0);
    for (int r = 0; r < 3; ++r) {
      const WorkerLine* res = run.find("RESULT", r);
      ASSERT_NE(res, nullptr);
      EXPECT_EQ(res->field("status"), "PG_OK") << res->msg;
    }
    EXPECT_GT(counts.connections, 20u) << "the flood never reached the store";
    EXPECT_GT(counts.rejected, 5u) << "the store answered too few hostile frames in 20 s";
  }
}

}  // namespace
}  // namespace procgroup::testing
