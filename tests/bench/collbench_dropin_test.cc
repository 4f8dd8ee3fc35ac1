// collbench as a drop-in for nccl-tests users: it runs as one rank without a launcher,
// takes nccl-tests' dtype names (and names the ones procgroup lacks), prints nccl-tests'
// per-rank "#  Rank  0 Group  0 Pid ... on HOST device ..." lines, and writes the host,
// date, version and backend detail into its JSON; sweep_plot.sh and compare_mpi.sh run from
// an install prefix (<prefix>/share/procgroup/bench) without BUILD_DIR.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "bench_run.h"

namespace procgroup::testing {
namespace {

namespace fs = std::filesystem;

// No launcher's variables, so collbench must make its own group of one.
constexpr std::array kAlone = {
    "RANK=", "WORLD_SIZE=", "OMPI_COMM_WORLD_RANK=", "SLURM_PROCID=", "PROCGROUP_TIMEOUT=30"};

struct AloneRun {
  ProcessResult result;
  nlohmann::json json;
};

AloneRun run_alone(std::vector<std::string> args, const std::string& backend = "gloo") {
  TempDir dir;
  const std::string json_path = dir.str() + "/out.json";
  std::vector<std::string> argv{COLLBENCH_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--json", json_path});
  std::vector<std::string> env(kAlone.begin(), kAlone.end());
  env.push_back("PROCGROUP_BACKEND=" + backend);
  AloneRun r{run(argv, 60, env), nullptr};
  const std::string text = read_file(json_path);
  if (!text.empty()) r.json = nlohmann::json::parse(text);
  return r;
}

std::string this_host() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

TEST(CollbenchDropIn, RunsAsOneRankWithoutALauncher) {
  const AloneRun r = run_alone({"allreduce", "-b", "8", "-e", "1K", "-n", "2", "-w", "1"});
  ASSERT_EQ(r.result.exit_code, 0) << r.result.out << r.result.err;
  ASSERT_TRUE(r.json.is_object()) << r.result.out;
  EXPECT_EQ(r.json["world_size"], 1);
  EXPECT_EQ(r.json["wrong_total"], 0);
  EXPECT_EQ(r.json["rows"].size(), 8u) << r.json["rows"];  // 8 B .. 1 KiB
}

TEST(CollbenchDropIn, TakesNcclTestsTypeNames) {
  const AloneRun r = run_alone({"allreduce", "-b", "8", "-e", "8", "-n", "1", "-w", "0", "-d",
                                "float,half,bfloat16,double,int8,uint8,int32,int64,int,char"});
  ASSERT_EQ(r.result.exit_code, 0) << r.result.out << r.result.err;
  std::vector<std::string> dtypes;
  for (const auto& row : r.json["rows"]) dtypes.push_back(row["dtype"]);
  // int and char repeat int32 and int8, so they add no rows.
  const std::vector<std::string> want = {"f32", "f16", "bf16", "f64", "i8", "u8", "i32", "i64"};
  EXPECT_EQ(dtypes, want);
  EXPECT_EQ(r.json["wrong_total"], 0);
}

TEST(CollbenchDropIn, NamesTheNcclTestsTypesProcgroupLacks) {
  for (const std::string name : {"uint64", "uint32", "f8e4m3"}) {
    const AloneRun r = run_alone({"allreduce", "-d", name});
    EXPECT_EQ(r.result.exit_code, 2) << name << r.result.out << r.result.err;
    EXPECT_NE(r.result.err.find("'" + name + "' is an nccl-tests type that procgroup has no dtype"),
              std::string::npos)
        << r.result.err;
  }
  const AloneRun r = run_alone({"allreduce", "-d", "floot"});
  EXPECT_EQ(r.result.exit_code, 2);
  EXPECT_NE(r.result.err.find("unknown type 'floot': use f32 f64 f16 bf16 i8 u8 i32 i64, "
                              "nccl-tests' names (float double half"),
            std::string::npos)
      << r.result.err;
}

TEST(CollbenchDropIn, PrintsEachRanksHostPidAndDevice) {
  const AloneRun r = run_alone({"broadcast", "-b", "8", "-e", "8", "-n", "1", "-w", "0"});
  ASSERT_EQ(r.result.exit_code, 0) << r.result.out << r.result.err;
  const std::regex line("#  Rank  0 Group  0 Pid +([0-9]+) on +(\\S+) device cpu\n");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.result.out, m, line)) << r.result.out;
  EXPECT_EQ(m[2].str(), this_host());
  ASSERT_EQ(r.json["ranks"].size(), 1u);
  EXPECT_EQ(r.json["ranks"][0]["pid"], std::stoi(m[1].str()));
  EXPECT_EQ(r.json["ranks"][0]["device"], "cpu");
}

TEST(CollbenchDropIn, JsonSaysHostDateVersionAndBackendDetail) {
  const AloneRun r = run_alone({"reduce", "-b", "8", "-e", "8", "-n", "1", "-w", "0"});
  ASSERT_EQ(r.result.exit_code, 0) << r.result.out << r.result.err;
  EXPECT_EQ(r.json["host"], this_host());
  EXPECT_EQ(r.json["version"], PROCGROUP_PROJECT_VERSION);
  const std::string date = r.json["date"];
  EXPECT_TRUE(std::regex_match(date, std::regex("20[0-9]{2}-[01][0-9]-[0-3][0-9]T[0-9:]{8}Z")))
      << date;
  const std::string detail = r.json["backend_detail"];
  EXPECT_TRUE(
      std::regex_match(detail, std::regex("libprocgroup [0-9]+\\.[0-9]+, plugin gloo: all native")))
      << detail;
  EXPECT_NE(r.result.out.find(detail), std::string::npos) << "the header shows it too\n"
                                                          << r.result.out;
}

// loopback_p2p has only send and recv: the detail says the core runs the reduce.
TEST(CollbenchDropIn, BackendDetailSaysWhatTheCoreEmulates) {
  const AloneRun r =
      run_alone({"reduce", "-b", "8", "-e", "8", "-n", "1", "-w", "0"}, "loopback_p2p");
  ASSERT_EQ(r.result.exit_code, 0) << r.result.out << r.result.err;
  EXPECT_EQ(r.json["backend"], "loopback_p2p");
  EXPECT_NE(r.json["backend_detail"].get<std::string>().find(
                "plugin loopback_p2p; emulated by the core: reduce"),
            std::string::npos)
      << r.json["backend_detail"];
}

// An install prefix made of links into the build tree: bin/, lib/ (plugins in
// lib/procgroup/) and the scripts copied where `cmake --install` puts them.
class InstalledScripts : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path bin = fs::path(COLLBENCH_PATH).parent_path();
    fs::create_directories(prefix_.path() / "bin");
    for (const char* tool : {"pgrun", "collbench"}) {
      fs::create_symlink(bin / tool, prefix_.path() / "bin" / tool);
    }
    fs::create_directory_symlink(fs::path(PROCGROUP_LIB_DIR), prefix_.path() / "lib");
    fs::create_directories(scripts());
    for (const char* script : {"sweep_plot.sh", "compare_mpi.sh"}) {
      fs::copy_file(fs::path(PROCGROUP_SOURCE_DIR) / "bench/scripts" / script, scripts() / script);
    }
  }
  fs::path scripts() const { return prefix_.path() / "share/procgroup/bench"; }
  TempDir prefix_;
  TempDir work_;  // the current directory has no build/ here
};

TEST_F(InstalledScripts, SweepPlotFindsTheToolsBesideItsPrefix) {
  if (run({"/bin/sh", "-c", "command -v gnuplot"}, 10).exit_code != 0) {
    GTEST_SKIP() << "gnuplot is not installed (Debian gnuplot-nox)";
  }
  const fs::path out = work_.path() / "results";
  const ProcessResult r =
      run({"/bin/sh", "-c",
           "cd '" + work_.str() + "' && PROCGROUP_BACKEND= BUILD_DIR= '" +
               (scripts() / "sweep_plot.sh").string() + "' -o '" + out.string() +
               "' -n 1 --no-mpi --no-direct --memcpy 5 -- -b 8 -e 64 -n 1 -w 0"},
          120, {"RANK=", "WORLD_SIZE=", "PROCGROUP_TIMEOUT=30"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(fs::exists(out / "allreduce_busbw.png")) << r.err;
  EXPECT_EQ(count(read_file(out / "allreduce_gloo.csv"), "\n"), 5) << "a header and 8..64 B";
  EXPECT_EQ(read_file(out / "memcpy.csv"), "size,gbps\n8,5\n16,5\n32,5\n64,5\n");
}

TEST_F(InstalledScripts, CompareMpiLooksForItsToolsInThePrefix) {
  const ProcessResult r = run({"/bin/sh", "-c",
                               "cd '" + work_.str() + "' && BUILD_DIR= '" +
                                   (scripts() / "compare_mpi.sh").string() + "' gloo"},
                              30);
  // The prefix has no mpi_collbench: the script must say it looked there, not in build/.
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find(fs::canonical(prefix_.path()).string() + "/bin/mpi_collbench not built"),
            std::string::npos)
      << r.err;
}

// Both sides run in --mode's mode: a -z or --blocking among the tools' options is refused
// before anything runs, and so is a mode that is neither blocking nor pipelined.
TEST_F(InstalledScripts, CompareMpiRefusesMixedModes) {
  const std::string script = "'" + (scripts() / "compare_mpi.sh").string() + "'";
  for (const char* args : {"gloo -- -b 8 -e 64 -z 0", "gloo --mode pipelined -- -z1",
                           "gloo allreduce -- --blocking 1", "gloo --mode fast"}) {
    const ProcessResult r =
        run({"/bin/sh", "-c", "cd '" + work_.str() + "' && BUILD_DIR= " + script + " " + args}, 30);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out << r.err;
    EXPECT_NE(r.err.find("mode"), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(r.err.find("not built"), std::string::npos) << args << "\n" << r.err;
  }
}

// Both sides are bound alike (--bind core or none); anything else is refused up front.
TEST_F(InstalledScripts, CompareMpiRefusesAnUnknownBinding) {
  const std::string script = "'" + (scripts() / "compare_mpi.sh").string() + "'";
  const ProcessResult r = run(
      {"/bin/sh", "-c", "cd '" + work_.str() + "' && BUILD_DIR= " + script + " gloo --bind socket"},
      30);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--bind is core or none, not 'socket'"), std::string::npos) << r.err;
}

// --busy takes a count of busy processes to run beside both sides; anything else is refused
// before any starts.
TEST_F(InstalledScripts, CompareMpiRefusesABadBusyCount) {
  const std::string script = "'" + (scripts() / "compare_mpi.sh").string() + "'";
  for (const char* busy : {"two", "-1", ""}) {
    const ProcessResult r =
        run({"/bin/sh", "-c",
             "cd '" + work_.str() + "' && BUILD_DIR= " + script + " gloo --busy '" + busy + "'"},
            30);
    EXPECT_EQ(r.exit_code, 2) << busy << "\n" << r.out << r.err;
    EXPECT_NE(r.err.find("--busy takes a count (0: none)"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace procgroup::testing
