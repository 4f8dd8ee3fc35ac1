// collbench: collective benchmark over procgroup in nccl-tests' shape. Launch it like any
// procgroup program:
//
//   pgrun --nproc-per-node 2 build/bin/collbench allreduce -b 8 -e 256M -f 2 -n 20 -w 5
//         -d f32 -o sum -c 1 [--direct] [--json out.json] [--csv out.csv]
//
// The backend is procgroup's choice (PROCGROUP_BACKEND). --direct also times raw Gloo in the
// same run. See docs/benchmarks.md for the columns.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>

#include "options.h"
#include "procgroup_engine.h"
#include "runner.h"
#if COLLBENCH_HAVE_GLOO_DIRECT
#include "gloo_direct.h"
#endif

namespace procgroup::bench {
namespace {

constexpr const char* kDescription =
    "collbench: time one procgroup collective over a range of sizes, nccl-tests style, on "
    "the backend PROCGROUP_BACKEND names. Launch under pgrun (or torchrun, mpirun, srun).";

// The group timeout, which also bounds the raw Gloo context of --direct.
std::chrono::milliseconds group_timeout() {
  const char* s = std::getenv("PROCGROUP_TIMEOUT");
  const long seconds = s != nullptr ? std::atol(s) : 0;
  return std::chrono::seconds(seconds > 0 ? seconds : 300);
}

std::unique_ptr<Engine> make_direct(Communicator& comm, const std::string& backend) {
#if COLLBENCH_HAVE_GLOO_DIRECT
  if (backend != "gloo") {
    throw std::invalid_argument(
        "--direct compares with raw Gloo, so it needs the gloo backend "
        "(this group runs on '" +
        backend + "'; set PROCGROUP_BACKEND=gloo)");
  }
  return make_gloo_direct_engine(comm, group_timeout());
#else
  (void)comm;
  (void)backend;
  throw std::invalid_argument(
      "--direct is unavailable: collbench was built without Gloo "
      "(libgloo-dev)");
#endif
}

int run(const Options& options) {
  Group group = Group::from_env();
  ProcgroupCommunicator comm(group);
  ProcgroupEngine engine(group);
  RunInfo info{"collbench", std::string(group.backend()), "", "", group.size(), options};
  std::unique_ptr<Engine> direct;
  if (options.direct) {
    direct = make_direct(comm, info.backend);
    info.direct_name = "gloo";
  }
  const int status = run_benchmark(info, comm, engine, direct.get());
  direct.reset();
  group.destroy();
  return status;
}

}  // namespace
}  // namespace procgroup::bench

int main(int argc, char** argv) {
  using namespace procgroup::bench;
  const ParsedOptions parsed = parse_options(argc, argv, {"collbench", kDescription, true});
  if (!parsed.run) return parsed.exit_code;
  // Gloo writes with writev(): a peer that exits first must not kill us with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  try {
    return run(parsed.options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "collbench: %s\n", e.what());
    return 1;
  }
}
