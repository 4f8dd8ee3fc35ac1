// options.h — the command line shared by collbench and mpi_collbench, in nccl-tests' shape:
//
//   collbench allreduce -b 8 -e 256M -f 2 -n 20 -w 5 -d f32 -o sum -c 1 [--json F] [--csv F]
//
// One subcommand names the collective; options may come before or after it. Sizes take K, M
// and G suffixes (powers of 1024); -d and -o take a name, a comma list or "all".
//
//   ParsedOptions parsed = parse_options(argc, argv, {"collbench", "...", true});
//   if (!parsed.run) return parsed.exit_code;  // --help, or a usage error already printed
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench_types.h"

namespace procgroup::bench {

// How the per-rank times of one timed loop become the reported time (nccl-tests' -a).
enum class TimeAggregate { kRank0 = 0, kAvg = 1, kMin = 2, kMax = 3 };

struct Options {
  Coll op = Coll::kAllreduce;
  uint64_t min_bytes = 8;
  uint64_t max_bytes = uint64_t{32} << 20;
  uint64_t factor = 2;
  int iters = 20;
  int warmup = 5;
  std::vector<Dtype> dtypes{Dtype::kF32};
  std::vector<RedOp> redops{RedOp::kSum};
  int root = 0;
  bool check = true;
  bool blocking = false;  // wait for each operation before issuing the next
  TimeAggregate aggregate = TimeAggregate::kMax;
  std::string json_path;
  std::string csv_path;
  bool direct = false;         // collbench: also time the raw library (Gloo, or NCCL with -g cuda)
  bool reference = false;      // also time memcpy and f32 reduce-into at each size (runner.h)
  std::string device = "cpu";  // collbench -g: where the buffers live (cpu or cuda)
  int corrupt_rank = -1;       // test hook: this rank corrupts its input before each check
};

struct ToolInfo {
  const char* name;            // "collbench"
  const char* description;     // first paragraph of --help
  bool offers_direct;          // whether --direct exists
  bool offers_device = false;  // whether -g/--device exists
};

struct ParsedOptions {
  Options options;
  bool run = false;   // false: exit with exit_code; messages were printed already
  int exit_code = 0;  // 0 after --help, kUsageExitCode after a usage error
};

inline constexpr int kUsageExitCode = 2;

ParsedOptions parse_options(int argc, char** argv, const ToolInfo& tool);

}  // namespace procgroup::bench
