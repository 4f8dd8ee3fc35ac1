// pgrun checks before the first fork that the node can hold the ranks: a job too big for the
// open-file or process limits fails with one message and starts no rank at all.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "subprocess.h"

namespace procgroup::testing {
namespace {

// pgrun under bash (dash has no ulimit -u) after `ulimit ULIMIT_ARGS` (e.g. "-n 64").
ProcessResult run_with_ulimit(const std::string& ulimit_args, const std::string& pgrun_args) {
  return run(
      {"/bin/bash", "-c", "ulimit " + ulimit_args + " && exec " + PGRUN_PATH + " " + pgrun_args},
      30);
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(PgrunResources, TooFewOpenFilesFailsBeforeAnyRankStarts) {
  TempDir dir;
  const ProcessResult r = run_with_ulimit(
      "-n 64", "--nproc-per-node 300 " + std::string(PGRUN_PROBE_PATH) + " ready " + dir.str());
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "pgrun: cannot start 300 ranks: pgrun needs about ")) << r.err;
  EXPECT_TRUE(contains(r.err, "RLIMIT_NOFILE allows at most 64 (ulimit -Hn)")) << r.err;
  EXPECT_TRUE(contains(r.err, "--no-prefix")) << r.err;
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "a rank was started";
}

TEST(PgrunResources, RaisesItsOwnSoftOpenFileLimitButRanksKeepTheOriginal) {
  // 24 ranks need about 48 descriptors in pgrun, above the soft limit of 40 but within the
  // hard one: pgrun raises its own and starts the ranks with 40, as it was started.
  const ProcessResult r =
      run_with_ulimit("-Sn 40", "--nproc-per-node 24 " + std::string(PGRUN_PROBE_PATH) + " nofile");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count(r.out, "] nofile=40\n"), 24) << r.out;
}

TEST(PgrunResources, MoreRanksThanTheKernelHasProcessesFailsBeforeAnyRankStarts) {
  // No kernel allows more than 4194304 pids (PID_MAX_LIMIT), so this is refused everywhere.
  TempDir dir;
  const ProcessResult r = run({PGRUN_PATH, "--no-prefix", "--nproc-per-node", "10000000",
                               PGRUN_PROBE_PATH, "ready", dir.str()},
                              30);
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "pgrun: cannot start 10000000 ranks: ")) << r.err;
  EXPECT_TRUE(contains(r.err, " more processes (")) << r.err;
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "a rank was started";
}

// True when a user without privileges can run `path` (every folder above it searchable).
bool others_can_execute(std::filesystem::path path) {
  using std::filesystem::perms;
  for (; path != path.root_path(); path = path.parent_path()) {
    if ((std::filesystem::status(path).permissions() & perms::others_exec) == perms::none) {
      return false;
    }
  }
  return true;
}

TEST(PgrunResources, ProcessLimitTooSmallForTheRanksFailsBeforeAnyRankStarts) {
  // The kernel does not apply RLIMIT_NPROC to root: as root, run pgrun as nobody.
  std::string as_user;
  if (::getuid() == 0) {
    if (!others_can_execute(PGRUN_PATH) || !std::filesystem::exists("/usr/bin/setpriv")) {
      GTEST_SKIP() << "root, and cannot run pgrun as nobody (RLIMIT_NPROC spares root)";
    }
    as_user = "/usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups ";
  }
  TempDir dir;
  const ProcessResult r =
      run({"/bin/bash", "-c",
           as_user + "/bin/bash -c 'ulimit -u 4 && exec " + PGRUN_PATH + " --nproc-per-node 8 " +
               PGRUN_PROBE_PATH + " ready " + dir.str() + "'"},
          30);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "RLIMIT_NPROC (ulimit -u) allows 4 processes")) << r.err;
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "a rank was started";
}

}  // namespace
}  // namespace procgroup::testing
