// Command-line options of pgrun, parsed with CLI11 under torchrun's option names (both the
// dashed and torchrun's underscored spellings are accepted, e.g. --nproc-per-node and
// --nproc_per_node), so a torchrun command line for a --no-python program works unchanged.
//
//   ParsedOptions parsed = parse_options(argc, argv);
//   if (!parsed.run) return parsed.exit_code;  // --help, or a usage error already reported
//   launch(parsed.options);
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace procgroup::pgrun {

// --store-token: auto generates a secret for a single-node job without one; off never does.
enum class StoreTokenMode { kAuto, kOff };
// --bind-to: none leaves ranks where the kernel puts them (as torchrun does); core binds each
// to its own share of pgrun's CPUs (cpu_binding.h), as mpirun does by default.
enum class BindMode { kNone, kCore };

struct Options {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  std::optional<int> master_port;  // unset: pick a free one (single node only)
  bool prefix_output = true;
  double kill_grace_s = 5.0;
  StoreTokenMode store_token = StoreTokenMode::kAuto;
  BindMode bind_to = BindMode::kNone;
  std::vector<std::string> command;  // the program, then its arguments
};

struct ParsedOptions {
  Options options;
  bool run = false;   // false: exit with exit_code, messages were already printed
  int exit_code = 0;  // 0 after --help, kUsageExitCode after a usage error
};

// The exit code of a command-line mistake, as argparse (and so torchrun) uses.
inline constexpr int kUsageExitCode = 2;

// Parses and validates argv; prints help or a one-line error (plus a hint) itself.
ParsedOptions parse_options(int argc, char** argv);

}  // namespace procgroup::pgrun
