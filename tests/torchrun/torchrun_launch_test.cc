// torchrun's default launch running a plain procgroup program. Its elastic agent already
// listens on MASTER_PORT with a c10d TCPStore and sets TORCHELASTIC_USE_AGENT_STORE=True, so
// rank 0 must not start a store there (it used to fail with "Address already in use"):
// every rank joins the agent's store instead.
//
// The command is what works on Debian's torch 1.13 (underscore options); --redirects 2
// --tee 2 sidesteps a Python 3.11 problem in 1.13's output handling, and still shows every
// rank's stderr here.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "subprocess.h"

namespace procgroup::testing {
namespace {

// Empty when TORCH_PYTHON has torchrun; else why not, for GTEST_SKIP.
const std::string& torchrun_unavailable() {
  static const std::string why = [] {
    ProcessResult r = run({TORCH_PYTHON, "-c", "import torch.distributed.run"}, 60);
    if (r.exit_code == 0) return std::string();
    return std::string(TORCH_PYTHON " cannot import torch.distributed.run (install "
                                    "python3-torch): ") +
           r.err;
  }();
  return why;
}

ProcessResult torchrun(const std::string& backend, int port) {
  return run({TORCH_PYTHON, "-m", "torch.distributed.run", "--nproc_per_node", "2",
              "--no_python", "--redirects", "2", "--tee", "2", "--master_port",
              std::to_string(port), MP_WORKER_PATH, "collectives"},
             150, {"PROCGROUP_BACKEND=" + backend, "PROCGROUP_TIMEOUT=60"});
}

class TorchrunDefaultLaunch : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchrunDefaultLaunch, EveryRankJoinsTheAgentStoreAndCollectivesAreRight) {
  if (!torchrun_unavailable().empty()) GTEST_SKIP() << torchrun_unavailable();
  const std::string& backend = GetParam();
  ProcessResult r = torchrun(backend, free_port());
  const std::string all = r.out + r.err;
  EXPECT_FALSE(r.timed_out) << all;
  EXPECT_EQ(r.exit_code, 0) << all;
  EXPECT_EQ(all.find("Address already in use"), std::string::npos) << all;
  // mp_worker checks five collectives on each of the two ranks.
  EXPECT_EQ(count(all, ": ok"), 2 * 5) << all;
  EXPECT_EQ(count(all, "WRONG"), 0) << all;
  EXPECT_NE(all.find("rank 1 alltoall: ok"), std::string::npos) << all;
}

std::vector<std::string> backends() {
  std::vector<std::string> out;
#ifdef PG_HAVE_GLOO
  out.push_back("gloo");
#endif
#ifdef PG_HAVE_UCX
  out.push_back("ucx");
#endif
  return out;
}

INSTANTIATE_TEST_SUITE_P(Backends, TorchrunDefaultLaunch, ::testing::ValuesIn(backends()),
                         [](const auto& param_info) { return param_info.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TorchrunDefaultLaunch);

}  // namespace
}  // namespace procgroup::testing
