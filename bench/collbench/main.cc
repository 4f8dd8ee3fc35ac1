// collbench: collective benchmark over procgroup in nccl-tests' shape. Launch it like any
// procgroup program:
//
//   pgrun --nproc-per-node 2 build/bin/collbench allreduce -b 8 -e 256M -f 2 -n 20 -w 5
//         -d f32 -o sum -c 1 [--direct] [--json out.json] [--csv out.csv] [-g cuda]
//
// Started without a launcher it runs as one rank. The backend is procgroup's choice
// (PROCGROUP_BACKEND; nccl by default with -g cuda).
// --direct also times raw Gloo (host buffers) or raw NCCL (-g cuda) in the same run. See
// docs/benchmarks.md for the columns.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>

#include "options.h"
#include "procgroup_engine.h"
#include "runner.h"
#if COLLBENCH_HAVE_GLOO_DIRECT
#include "gloo_direct.h"
#endif
#if COLLBENCH_HAVE_CUDA
#include "cuda_memory.h"
#include "nccl_direct.h"
#endif

namespace procgroup::bench {
namespace {

constexpr const char* kDescription =
    "collbench: time one procgroup collective over a range of sizes, nccl-tests style, on "
    "the backend PROCGROUP_BACKEND names. Launch under pgrun (or torchrun, mpirun, srun).";

// Whether a launcher started us (pgrun and torchrun set RANK, mpirun and srun their own);
// run alone, collbench is one rank of a group of one, as fashion_mnist is.
bool launched() {
  for (const char* v : {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"}) {
    const char* s = std::getenv(v);
    if (s != nullptr && *s != '\0') return true;
  }
  return false;
}

// The procgroup operation a collective is timed with (sendrecv: send and recv).
pg_op_t pg_op_of(Coll op) {
  switch (op) {
    case Coll::kAllreduce: return PG_OP_ALLREDUCE;
    case Coll::kAllgather: return PG_OP_ALLGATHER;
    case Coll::kReduceScatter: return PG_OP_REDUCE_SCATTER;
    case Coll::kBroadcast: return PG_OP_BROADCAST;
    case Coll::kReduce: return PG_OP_REDUCE;
    case Coll::kAlltoall: return PG_OP_ALLTOALL;
    case Coll::kGather: return PG_OP_GATHER;
    case Coll::kScatter: return PG_OP_SCATTER;
    case Coll::kSendrecv: return PG_OP_SEND;
  }
  return PG_OP_COUNT_;
}

// The JSON's backend_detail: the library's version and whether the plugin runs the measured
// collective, dtypes and reduce ops itself or gets them from the core's emulation.
std::string backend_detail(const Group& group, const Options& o) {
  uint32_t major = 0, minor = 0;
  pg_get_version(&major, &minor);
  const pg_capabilities_t caps = group.capabilities();
  const auto native = [](uint32_t mask, int bit) { return (mask >> bit & 1u) != 0; };
  std::string emulated;
  if (!native(caps.native_ops, pg_op_of(o.op))) emulated += std::string(" ") + coll_name(o.op);
  for (Dtype d : o.dtypes) {
    if (!native(caps.native_dtypes, to_pg(d))) emulated += std::string(" ") + dtype_name(d);
  }
  if (reduces(o.op)) {
    for (RedOp r : o.redops) {
      if (!native(caps.native_reduce_ops, to_pg(r))) emulated += std::string(" ") + redop_name(r);
    }
  }
  return "libprocgroup " + std::to_string(major) + "." + std::to_string(minor) + ", plugin " +
         std::string(group.backend()) +
         (emulated.empty() ? ": all native" : "; emulated by the core:" + emulated);
}

// The group timeout, which also bounds the raw Gloo context of --direct.
std::chrono::milliseconds group_timeout() {
  const char* s = std::getenv("PROCGROUP_TIMEOUT");
  const long seconds = s != nullptr ? std::atol(s) : 0;
  return std::chrono::seconds(seconds > 0 ? seconds : 300);
}

#if COLLBENCH_HAVE_CUDA
// The first of the launchers' variables that is set, else fallback.
int env_int(std::initializer_list<const char*> names, int fallback) {
  for (const char* v : names) {
    const char* s = std::getenv(v);
    if (s != nullptr && *s != '\0') return std::atoi(s);
  }
  return fallback;
}
#endif

// -g cuda: this rank's GPU (made current before the group exists, so NCCL finds it), its
// buffers, a stream of its own for procgroup's operations (as the raw side has), and the
// host-clock timer both sides share.
struct DeviceSide {
  Placement placement;
  std::unique_ptr<Memory> memory;
  std::unique_ptr<Timer> timer;
#if COLLBENCH_HAVE_CUDA
  std::shared_ptr<CudaStream> stream;
#endif
};

DeviceSide make_device_side(const std::string& device) {
  DeviceSide d;
  if (device != "cuda") return d;
#if COLLBENCH_HAVE_CUDA
  const int local_rank = env_int({"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}, 0);
  const int local_size = env_int({"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"}, 1);
  const int index = select_cuda_device(local_rank, local_size);
  d.stream = std::make_shared<CudaStream>();
  d.placement = {PG_DEVICE_CUDA, index, d.stream->get()};
  d.memory = std::make_unique<CudaMemory>(index);
  d.timer = std::make_unique<CudaWallTimer>();
  return d;
#else
  throw std::runtime_error(
      "-g cuda: this collbench was built without CUDA (no CUDA toolkit and NCCL found at "
      "configure time, or PROCGROUP_WITH_NCCL=OFF)");
#endif
}

std::unique_ptr<Engine> make_direct(Communicator& comm, const std::string& backend,
                                    const DeviceSide& device, RunInfo& info) {
  if (device.placement.type == PG_DEVICE_CUDA) {
    if (backend != "nccl") {
      throw std::invalid_argument(
          "--direct with -g cuda compares with raw NCCL, so it needs the nccl backend (this "
          "group runs on '" +
          backend + "'; unset PROCGROUP_BACKEND or set it to nccl)");
    }
#if COLLBENCH_HAVE_CUDA
    info.direct_name = "nccl";
    info.direct_detail = "a raw NCCL communicator (ncclCommInitRank, own stream, CUDA events)";
    return make_nccl_direct_engine(comm, device.placement.index);
#endif
  }
  info.direct_name = "gloo";
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
  const DeviceSide device = make_device_side(options.device);
  pg_group_options_t group_options = PG_GROUP_OPTIONS_INIT;  // the rest from the environment
  group_options.device_type = device.placement.type;
  if (!launched()) {
    group_options.rank = 0;
    group_options.size = 1;
  }
  Group group(group_options);
  ProcgroupCommunicator comm(group, device.memory.get(), device.placement);
  ProcgroupEngine engine(group, device.placement, device.timer.get());
  RunInfo info{
      "collbench", std::string(group.backend()), backend_detail(group, options), "", group.size(),
      options};
  info.buffers = device.memory ? device.memory->name() : "host";
  std::unique_ptr<Engine> direct;
  if (options.direct) direct = make_direct(comm, info.backend, device, info);
  const int status = run_benchmark(info, comm, engine, direct.get(), device.memory.get());
  direct.reset();
  group.destroy();
  return status;
}

}  // namespace
}  // namespace procgroup::bench

int main(int argc, char** argv) {
  using namespace procgroup::bench;
  const ParsedOptions parsed = parse_options(argc, argv, {"collbench", kDescription, true, true});
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
