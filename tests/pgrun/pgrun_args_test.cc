// pgrun's command line: usage errors, programs that cannot run, and --help.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include "subprocess.h"

namespace procgroup::testing {
namespace {

struct BadArguments {
  std::string name;
  std::vector<std::string> options;  // placed before the probe; no probe when with_program false
  bool with_program;
  std::string message;  // a part of the one-line error
};

// Names the case in gtest's output instead of dumping the struct's bytes.
void PrintTo(const BadArguments& arguments, std::ostream* os) { *os << arguments.name; }

class PgrunBadArguments : public ::testing::TestWithParam<BadArguments> {};

TEST_P(PgrunBadArguments, FailFastWithAMessageAndStartNoRank) {
  TempDir dir;
  std::vector<std::string> argv = {PGRUN_PATH};
  argv.insert(argv.end(), GetParam().options.begin(), GetParam().options.end());
  if (GetParam().with_program) {
    argv.insert(argv.end(), {PGRUN_PROBE_PATH, "ready", dir.str()});
  }
  const ProcessResult r = run(argv, 30);
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("pgrun: error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(GetParam().message), std::string::npos) << r.err;
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "a rank was started";
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PgrunBadArguments,
    ::testing::Values(
        BadArguments{"UnknownOption", {"--bogus"}, true, "--bogus"},
        BadArguments{"UnknownOptionWithValue", {"--bogus=1"}, true, "--bogus"},
        BadArguments{"MissingProgram", {"--nproc-per-node", "2"}, false, "missing PROGRAM"},
        BadArguments{"ZeroRanks", {"--nproc-per-node", "0"}, true, "--nproc-per-node"},
        BadArguments{"NotANumber", {"--nproc-per-node", "many"}, true, "many"},
        BadArguments{"NodeRankTooLarge",
                     {"--nnodes", "2", "--node-rank", "2", "--master-port", "29500"},
                     true,
                     "--node-rank must be in [0, 1]"},
        BadArguments{"NegativeNodeRank", {"--node-rank", "-1"}, true, "--node-rank"},
        BadArguments{"MultiNodeWithoutPort", {"--nnodes", "2"}, true, "--master-port is required"},
        BadArguments{"PortOutOfRange", {"--master-port", "70000"}, true, "--master-port"},
        BadArguments{
            "StandaloneMultiNode", {"--standalone", "--nnodes", "2"}, true, "--standalone"},
        BadArguments{"NegativeGrace", {"--kill-grace", "-1"}, true, "--kill-grace"},
        BadArguments{"NanGrace",
                     {"--kill-grace", "nan"},
                     true,
                     "--kill-grace must be a number of seconds in [0, 86400], got nan"},
        BadArguments{"InfiniteGrace", {"--kill-grace", "inf"}, true, "got inf"},
        BadArguments{"GraceOverADay", {"--kill-grace", "86401"}, true, "got 86401"}),
    [](const ::testing::TestParamInfo<BadArguments>& case_info) { return case_info.param.name; });

TEST(PgrunArgs, MissingProgramExits127LikeAShell) {
  const ProcessResult r =
      run({PGRUN_PATH, "--nproc-per-node", "2", "/nonexistent/dir/program", "arg"}, 30);
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_EQ(r.err, "pgrun: cannot execute /nonexistent/dir/program: No such file or directory\n");

  const ProcessResult in_path = run({PGRUN_PATH, "pgrun-test-no-such-program"}, 30);
  EXPECT_EQ(in_path.exit_code, 127);
  EXPECT_NE(in_path.err.find("cannot execute pgrun-test-no-such-program: No such file"),
            std::string::npos)
      << in_path.err;
}

TEST(PgrunArgs, NonExecutableProgramExits126LikeAShell) {
  TempDir dir;
  const auto program = dir.path() / "not-executable";
  std::ofstream(program) << "#!/bin/sh\nexit 0\n";
  ASSERT_EQ(::chmod(program.c_str(), 0644), 0);
  const ProcessResult r = run({PGRUN_PATH, program.string()}, 30);
  EXPECT_EQ(r.exit_code, 126);
  EXPECT_EQ(r.err, "pgrun: cannot execute " + program.string() + ": Permission denied\n");
}

TEST(PgrunArgs, HelpDocumentsOptionsExampleAndOtherLaunchers) {
  const ProcessResult r = run({PGRUN_PATH, "--help"}, 30);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* part :
       {"--nproc-per-node", "--nnodes", "--node-rank", "--master-addr", "--master-port",
        "--standalone", "--tee-prefix", "--no-prefix", "--kill-grace", "RANK", "LOCAL_WORLD_SIZE",
        "Example", "torchrun --no-python", "mpirun", "srun"}) {
    EXPECT_NE(r.out.find(part), std::string::npos) << "help lacks " << part << ":\n" << r.out;
  }
}

}  // namespace
}  // namespace procgroup::testing
