// Real processes on loopback, launched the ways users launch them: pgrun, plain
// torchrun-style environment, Slurm's and Open MPI's variables, and mpirun itself.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "subprocess.h"

namespace procgroup::testing {
namespace {

// Starts `size` workers with per-rank environments made by env_for(rank).
std::vector<ProcessResult> run_ranks(int size, const std::vector<std::string>& args,
                                     const std::function<std::vector<std::string>(int)>& env_for,
                                     double timeout_s = 60) {
  std::vector<std::unique_ptr<Subprocess>> procs;
  for (int r = 0; r < size; ++r) {
    std::vector<std::string> argv{MP_WORKER_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    procs.push_back(std::make_unique<Subprocess>(argv, env_for(r)));
  }
  std::vector<ProcessResult> results;
  for (auto& p : procs) results.push_back(p->wait(timeout_s));
  return results;
}

TEST(Launch, PgrunThreeRanksOnGloo) {
  ProcessResult r = run({PGRUN_PATH, "--nproc-per-node", "3", MP_WORKER_PATH, "collectives"}, 90,
                        {"PROCGROUP_BACKEND=gloo", "PROCGROUP_TIMEOUT=60"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count(r.out, ": ok"), 3 * 5) << r.out;
  EXPECT_EQ(count(r.out, "WRONG"), 0) << r.out;
  EXPECT_NE(r.out.find("[rank 2] rank 2 alltoall: ok"), std::string::npos) << r.out;
}

// The README's first run: no backend named, so ucx where it works on every rank (how the
// default is chosen: tests/mp/default_backend_test.cc).
TEST(Launch, DefaultBackendRunsTheDemo) {
#ifdef PROCGROUP_TEST_HAVE_UCX
  const std::string backend = "ucx";
#else
  const std::string backend = "gloo";
#endif
  ProcessResult r = run({PGRUN_PATH, "--nproc-per-node", "2", ALLREDUCE_DEMO_PATH, "1000"}, 60,
                        {"PROCGROUP_BACKEND="});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count(r.out, "on " + backend + ": allreduce of 1000 floats = 1 (correct)"), 2) << r.out;
}

TEST(Launch, TorchrunStyleEnvironmentWithoutALauncher) {
  const std::string port = std::to_string(free_port());
  auto results = run_ranks(2, {"collectives"}, [&](int r) {
    return std::vector<std::string>{"RANK=" + std::to_string(r),       "WORLD_SIZE=2",
                                    "LOCAL_RANK=" + std::to_string(r), "LOCAL_WORLD_SIZE=2",
                                    "MASTER_ADDR=127.0.0.1",           "MASTER_PORT=" + port,
                                    "PROCGROUP_BACKEND=gloo"};
  });
  for (auto& r : results) EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

TEST(Launch, SlurmVariables) {
  const std::string port = std::to_string(free_port());
  auto results = run_ranks(2, {"collectives"}, [&](int r) {
    return std::vector<std::string>{"RANK=",
                                    "WORLD_SIZE=",
                                    "SLURM_PROCID=" + std::to_string(r),
                                    "SLURM_NTASKS=2",
                                    "SLURM_LOCALID=" + std::to_string(r),
                                    "SLURM_NTASKS_PER_NODE=2",
                                    "SLURM_NNODES=1",
                                    "MASTER_PORT=" + port,
                                    "PROCGROUP_BACKEND=gloo"};
  });
  for (auto& r : results) EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

TEST(Launch, Mpirun) {
  if (access(MPIRUN_PATH, X_OK) != 0) GTEST_SKIP() << "mpirun not installed (openmpi-bin)";
  const std::string port = std::to_string(free_port());
  ProcessResult r = run({MPIRUN_PATH, "--allow-run-as-root", "--oversubscribe", "-np", "2", "--mca",
                         "btl", "self,tcp", "-x", "MASTER_PORT=" + port, "-x",
                         "PROCGROUP_BACKEND=gloo", MP_WORKER_PATH, "collectives"},
                        120, {"RANK=", "WORLD_SIZE=", "OMPI_MCA_plm_rsh_agent="});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count(r.out, ": ok"), 2 * 5) << r.out << r.err;
}

TEST(Launch, DeadPeerFailsTheOthersWithinTwoTimeouts) {
  ProcessResult r = run({PGRUN_PATH, "--nproc-per-node", "3", MP_WORKER_PATH, "leave-early"}, 60,
                        {"PROCGROUP_BACKEND=gloo", "PROCGROUP_TIMEOUT=5"});
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_LT(r.seconds, 2 * 5 + 5) << r.out << r.err;
  EXPECT_NE(r.out.find("error PG_ERR_"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(r.out.find("unexpectedly succeeded"), std::string::npos) << r.out;
}

// Groups from one environment share one store (one MASTER_PORT): side by side, and one after
// another when rank 0 is the last to leave the first (its store must still serve the next).
TEST(Launch, TwoGroupsFromTheSameEnvironmentShareTheStore) {
  ProcessResult r = run({PGRUN_PATH, "--nproc-per-node", "3", MP_WORKER_PATH, "two-groups"}, 60,
                        {"PROCGROUP_BACKEND=gloo", "PROCGROUP_TIMEOUT=20"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count(r.out, "second group allreduce: ok"), 3) << r.out << r.err;
  EXPECT_EQ(count(r.out, "world group allreduce: ok"), 3) << r.out << r.err;
}

TEST(Launch, NextGroupWhileRankZeroStillLeavesThePrevious) {
  ProcessResult r = run({PGRUN_PATH, "--nproc-per-node", "3", MP_WORKER_PATH, "next-group-early"},
                        60, {"PROCGROUP_BACKEND=gloo", "PROCGROUP_TIMEOUT=20"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count(r.out, "next world allreduce: ok"), 3) << r.out << r.err;
}

TEST(Launch, LoopbackRefusesRanksInSeparateProcesses) {
  ProcessResult r = run({PGRUN_PATH, "--nproc-per-node", "2", MP_WORKER_PATH, "collectives"}, 60,
                        {"PROCGROUP_BACKEND=loopback", "PROCGROUP_TIMEOUT=10"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("threads of one process"), std::string::npos) << r.out << r.err;
}

TEST(Launch, StorePortInUseIsAClearError) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string port = std::to_string(ntohs(addr.sin_port));
  auto results = run_ranks(1, {"collectives"}, [&](int) {
    return std::vector<std::string>{"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1",
                                    "MASTER_PORT=" + port, "PROCGROUP_TIMEOUT=5"};
  });
  close(fd);
  EXPECT_EQ(results[0].exit_code, 1);
  EXPECT_NE(results[0].out.find("PG_ERR_STORE"), std::string::npos) << results[0].out;
  EXPECT_NE(results[0].out.find(port), std::string::npos) << results[0].out;
}

}  // namespace
}  // namespace procgroup::testing
