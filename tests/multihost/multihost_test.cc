// Separate hosts (DESIGN.md §5-6): two network namespaces joined by a veth pair, two ranks
// per "host", one pgrun per host with --nnodes 2 --node-rank R --master-addr <host 0>, a
// shared PROCGROUP_STORE_TOKEN. Collectives must work across the hosts; then the link is
// cut mid-run and every rank's next collective must fail within two group timeouts (the
// timeout path: no connection is closed, packets just stop), and both pgruns must fail.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>

#include "fault_run.h"
#include "netns.h"

namespace procgroup::testing {
namespace {

constexpr int kTimeoutS = 4;
constexpr int kPerHost = 2;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string random_token() {
  std::random_device rd;
  std::string t;
  for (int i = 0; i < 32; ++i) t += "0123456789abcdef"[rd() % 16];
  return t;
}

class MultiHost : public ::testing::TestWithParam<std::string> {};

TEST_P(MultiHost, CollectivesAcrossHostsThenTheLinkIsCut) {
  std::string why;
  std::unique_ptr<TwoHosts> net = TwoHosts::create(&why);
  if (!net) GTEST_SKIP() << why;
  TempDir dir;
  const std::string cut_file = dir.str() + "/cut";
  const std::string token = "PROCGROUP_STORE_TOKEN=" + random_token();
  std::unique_ptr<Subprocess> node[2];
  for (int h = 0; h < 2; ++h) {
    RunSpec spec;
    spec.backend = GetParam();
    spec.nproc = kPerHost;
    spec.timeout_s = kTimeoutS;
    spec.kill_grace_s = 2 * kTimeoutS + 4;
    spec.wrapper = net->exec_prefix(h);
    spec.pgrun_args = {
        "--nnodes",      "2",    "--node-rank", std::to_string(h), "--master-addr", net->address(0),
        "--master-port", "29500"};
    spec.args = {"multihost", "--cut-file", cut_file, "--survive-sigterm"};
    spec.env = {token};
    // The namespaces share one kernel and /dev/shm: UCX would reach the other "host" through
    // shared memory and never notice the cut. TCP only, as between real hosts.
    if (spec.backend == "ucx") spec.env.push_back("UCX_TLS=tcp,self");
    node[h] = start_workers(spec);
  }
  std::vector<std::filesystem::path> checked;
  for (int r = 0; r < 2 * kPerHost; ++r)
    checked.emplace_back(cut_file + ".checked." + std::to_string(r));
  const bool all_checked = wait_for_files(checked, 60);
  ASSERT_TRUE(net->cut()) << "could not take the link down";
  const int64_t cut_ms = now_ms();
  std::ofstream(cut_file) << "cut\n";
  FaultRun runs[2] = {parse_run(node[0]->wait(60)), parse_run(node[1]->wait(60))};
  const std::string log = runs[0].log() + "\n---- host 1 ----\n" + runs[1].log();
  SCOPED_TRACE(log);
  ASSERT_TRUE(all_checked) << "the ranks did not get through the collectives across hosts";

  for (int h = 0; h < 2; ++h) {
    EXPECT_FALSE(runs[h].pgrun.timed_out);
    EXPECT_NE(runs[h].pgrun.exit_code, 0) << "pgrun on host " << h << " must fail";
    for (int local = 0; local < kPerHost; ++local) {
      const int r = h * kPerHost + local;
      SCOPED_TRACE("rank " + std::to_string(r));
      const WorkerLine* c = runs[h].find("CHECKED", r);
      ASSERT_NE(c, nullptr);
      EXPECT_EQ(c->field("good"), "1") << "wrong results across hosts";
      const WorkerLine* res = runs[h].find("RESULT", r);
      ASSERT_NE(res, nullptr) << "no result after the cut: it hung or crashed";
      EXPECT_NE(res->field("status"), "PG_OK");
      EXPECT_NE(res->msg.find("allreduce #3"), std::string::npos) << res->msg;
      EXPECT_LE(res->number("t_ms") - cut_ms, 2 * kTimeoutS * 1000 + 500) << res->msg;
      const WorkerLine* later = runs[h].find("LATER", r);
      ASSERT_NE(later, nullptr);
      EXPECT_EQ(later->field("status"), "PG_ERR_ABORTED");
      const WorkerLine* exit = runs[h].find("EXIT", r);
      ASSERT_NE(exit, nullptr) << "it crashed or was killed";
      EXPECT_EQ(exit->field("code"), "3");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, MultiHost, ::testing::ValuesIn(process_backends()));

}  // namespace
}  // namespace procgroup::testing
