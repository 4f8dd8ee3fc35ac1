// The default backend of a CPU group (api/src/core/default_backend.h), with two real ranks
// under pgrun: ucx where it loads and starts on every rank, else gloo on every rank, the
// choice logged once by rank 0 with its reason; PROCGROUP_BACKEND=gloo pins gloo.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "subprocess.h"

namespace procgroup::testing {
namespace {

constexpr double kTimeoutS = 30;

// Two ranks of `mp_worker backend`; rank_one_env ("export K=V; ...") runs on rank 1 only.
ProcessResult run_two(const std::vector<std::string>& env, const std::string& rank_one_env = "") {
  std::vector<std::string> full{"PROCGROUP_LOG_LEVEL=info", "PROCGROUP_TIMEOUT=10"};
  full.insert(full.end(), env.begin(), env.end());
  const std::string script = "if [ \"$RANK\" = 1 ]; then " +
                             (rank_one_env.empty() ? std::string(":") : rank_one_env) +
                             "; fi; exec \"$0\" backend";
  return run({PGRUN_PATH, "--nproc-per-node", "2", "/bin/sh", "-c", script, MP_WORKER_PATH},
             kTimeoutS, full);
}

// Both ranks ran on `backend`, and rank 0 alone logged the default's choice of it.
void expect_default(const ProcessResult& r, const std::string& backend, const std::string& why) {
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count(r.out, " backend " + backend + "\n"), 2) << r.out;
  const std::string line = "core: backend " + backend + " (default: ";
  EXPECT_EQ(count(r.out + r.err, line), 1) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find(line + why), std::string::npos) << r.out << r.err;
}

TEST(DefaultBackend, UnsetPicksUcxWhereItWorksOnEveryRank) {
#ifdef PROCGROUP_TEST_HAVE_UCX
  expect_default(run_two({"PROCGROUP_BACKEND="}), "ucx", "loads and starts on all 2 ranks)");
#else
  expect_default(run_two({"PROCGROUP_BACKEND="}), "gloo", "ucx is not installed on ranks 0-1)");
#endif
}

#ifdef PROCGROUP_TEST_HAVE_UCX
TEST(DefaultBackend, UcxThatFailsToLoadOnOneRankMeansGlooOnAll) {
  // The dynamic linker finds this empty libucp.so.0 first on rank 1, so dlopen fails there.
  TempDir dir;
  std::ofstream(dir.path() / "libucp.so.0").flush();
  ProcessResult r =
      run_two({"PROCGROUP_BACKEND="}, "export LD_LIBRARY_PATH='" + dir.path().string() + "'");
  expect_default(r, "gloo", "ucx failed to load on rank 1: ");
  EXPECT_NE(r.err.find("libucp.so.0: file too short"), std::string::npos) << r.err;
}

TEST(DefaultBackend, UcxThatFailsToStartOnOneRankMeansGlooOnAll) {
  // It loads, but its context finds no transport of that name.
  ProcessResult r = run_two({"PROCGROUP_BACKEND="}, "export UCX_TLS=no_such_transport");
  expect_default(r, "gloo", "ucx failed to start on rank 1: ");
  EXPECT_NE(r.err.find("ucp_init"), std::string::npos) << r.err;
}

TEST(DefaultBackend, UcxThatCannotConnectAfterTheChoiceIsAnErrorNamingTheDefault) {
  // UCX_TLS=self starts alone on every rank but reaches no other process: no fallback then,
  // the error says how to pin gloo (default_backend.h says why).
  ProcessResult r = run_two({"PROCGROUP_BACKEND=", "UCX_TLS=self"});
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("backend 'ucx' was the default (loads and starts on all 2 ranks); "
                       "PROCGROUP_BACKEND=gloo pins gloo"),
            std::string::npos)
      << r.out;
  EXPECT_LT(r.seconds, 8) << "the ranks must not wait for the 10 s timeout";
}
#endif

TEST(DefaultBackend, GlooPinnedByName) {
  ProcessResult r = run_two({"PROCGROUP_BACKEND=gloo"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(count(r.out, " backend gloo\n"), 2) << r.out;
  EXPECT_EQ(count(r.out + r.err, "(default: "), 0) << r.out << r.err;
}

TEST(DefaultBackend, DefaultOnOneRankAndANameOnAnotherIsAConfigError) {
  ProcessResult r = run_two({"PROCGROUP_BACKEND="}, "export PROCGROUP_BACKEND=gloo");
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("PG_ERR_CONFIG"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("backend differs between ranks: rank 0 '(default)', rank 1 'gloo'"),
            std::string::npos)
      << r.out;
  EXPECT_LT(r.seconds, 8) << "the ranks must not wait for the 10 s timeout";
}

}  // namespace
}  // namespace procgroup::testing
