#include "options.h"

#include <CLI/CLI.hpp>
#include <climits>
#include <cmath>
#include <cstdio>
#include <string_view>

namespace procgroup::pgrun {
namespace {

constexpr int kMaxKillGraceSeconds = 86400;

constexpr std::string_view kDescription =
    "pgrun: start N local ranks of PROGRAM with torchrun's env:// variables, prefix their "
    "output with the rank, forward SIGINT/SIGTERM/SIGHUP/SIGQUIT to them, and stop all ranks "
    "as soon as one fails, exiting with that rank's code.";

constexpr std::string_view kFooter = R"(Each rank gets, besides pgrun's own environment:
  RANK              node_rank * nproc_per_node + local_rank
  WORLD_SIZE        nnodes * nproc_per_node
  LOCAL_RANK        0 .. nproc_per_node-1
  LOCAL_WORLD_SIZE  nproc_per_node
  GROUP_RANK, NODE_RANK   node_rank
  MASTER_ADDR, MASTER_PORT
  PROCGROUP_STORE_TOKEN   with --store-token auto (the default) on a single node, a fresh
                    random secret unless the environment has one: only this job's ranks
                    can use rank 0's rendezvous store. It is never printed. On several
                    nodes, set it yourself to the same value on every node.

Each rank runs in its own process group; a signal is sent to the whole group, so the rank's
own children stop with it. If pgrun itself is killed, the kernel kills its ranks (but not
their children). Rank 0 reads pgrun's stdin unless it is a terminal; the other ranks read
/dev/null. A line a rank redraws with '\r' (a progress bar) is passed on at each redraw.
pgrun checks before starting any rank that the open-file and process limits can hold them.

Exit status: 0 when every rank exits 0; otherwise the code of the FIRST rank that failed
(128+N when it died of signal N, as shells report it). When one rank fails, the others get
SIGTERM, then SIGKILL after --kill-grace seconds. 127: PROGRAM not found; 126: PROGRAM not
executable; 2: bad command line.

Example:
  pgrun --nproc-per-node 4 ./train --epochs 3
  # two hosts, run on each with its own --node-rank:
  pgrun --nnodes 2 --node-rank 0 --nproc-per-node 8 --master-addr 10.0.0.1 \
        --master-port 29500 ./train

Programs launched by pgrun also run unchanged under `torchrun --no-python`, `mpirun` and
`srun`: procgroup reads the same torchrun variables, or Open MPI's and Slurm's own.)";

// CLI11 2.1 cannot name the trailing PROGRAM [ARGS...] (prefix_command keeps them out of the
// positional options), so the usage line is written here.
class UsageFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* /*app*/, std::string /*name*/) const override {
    return "Usage: pgrun [OPTIONS] PROGRAM [ARGS...]\n";
  }
};

// A usage error: one line naming the problem, then where to read more, like argparse.
ParsedOptions usage_error(const std::string& message) {
  std::fprintf(stderr, "pgrun: error: %s\nRun 'pgrun --help' for usage.\n", message.c_str());
  ParsedOptions parsed;
  parsed.exit_code = kUsageExitCode;
  return parsed;
}

ParsedOptions validate(Options options) {
  // "pgrun [OPTIONS] -- PROGRAM": CLI11 keeps the separator; after it PROGRAM may be anything.
  const bool after_separator = !options.command.empty() && options.command.front() == "--";
  if (after_separator) options.command.erase(options.command.begin());
  if (options.command.empty()) return usage_error("missing PROGRAM to run");
  if (!after_separator && options.command.front().starts_with("-")) {
    return usage_error("unknown option '" + options.command.front() + "'");
  }
  if (options.nproc_per_node < 1) {
    return usage_error("--nproc-per-node must be at least 1, got " +
                       std::to_string(options.nproc_per_node));
  }
  if (options.nnodes < 1) {
    return usage_error("--nnodes must be at least 1, got " + std::to_string(options.nnodes));
  }
  if (options.node_rank < 0 || options.node_rank >= options.nnodes) {
    return usage_error("--node-rank must be in [0, " + std::to_string(options.nnodes - 1) +
                       "] for --nnodes " + std::to_string(options.nnodes) + ", got " +
                       std::to_string(options.node_rank));
  }
  if (static_cast<long long>(options.nproc_per_node) * options.nnodes > INT_MAX) {
    return usage_error("--nnodes * --nproc-per-node is too large");
  }
  if (options.master_port && (*options.master_port < 1 || *options.master_port > 65535)) {
    return usage_error("--master-port must be in [1, 65535], got " +
                       std::to_string(*options.master_port));
  }
  // Other nodes cannot learn a port picked here, so a multi-node run has to name it.
  if (options.nnodes > 1 && !options.master_port) {
    return usage_error(
        "--master-port is required when --nnodes > 1 (every node must use the same "
        "port)");
  }
  // Finite and bounded so the deadline arithmetic cannot overflow or go NaN; a day is more than
  // any shutdown needs.
  if (!std::isfinite(options.kill_grace_s) || options.kill_grace_s < 0 ||
      options.kill_grace_s > kMaxKillGraceSeconds) {
    char got[32];
    std::snprintf(got, sizeof(got), "%g", options.kill_grace_s);
    return usage_error("--kill-grace must be a number of seconds in [0, " +
                       std::to_string(kMaxKillGraceSeconds) + "], got " + got);
  }
  if (options.master_addr.empty()) return usage_error("--master-addr must not be empty");
  ParsedOptions parsed;
  parsed.options = std::move(options);
  parsed.run = true;
  return parsed;
}

}  // namespace

ParsedOptions parse_options(int argc, char** argv) {
  Options options;
  bool standalone = false;
  int master_port = 0;

  CLI::App app{std::string(kDescription), "pgrun"};
  app.formatter(std::make_shared<UsageFormatter>());
  app.footer(std::string(kFooter));
  // Everything from PROGRAM on belongs to PROGRAM, including its own --options.
  app.prefix_command();

  app.add_option("--nproc-per-node,--nproc_per_node", options.nproc_per_node,
                 "Number of ranks to start on this node")
      ->capture_default_str();
  app.add_option("--nnodes", options.nnodes, "Number of nodes (one pgrun per node)")
      ->capture_default_str();
  app.add_option("--node-rank,--node_rank", options.node_rank, "Index of this node in [0, nnodes)")
      ->capture_default_str();
  app.add_option("--master-addr,--master_addr", options.master_addr,
                 "Address of rank 0's rendezvous store")
      ->capture_default_str();
  auto* port_option =
      app.add_option("--master-port,--master_port", master_port,
                     "Port of rank 0's rendezvous store (default: a free port, single node only)");
  app.add_flag("--standalone", standalone,
               "Single-node run with a free port (the default here; kept for torchrun "
               "command lines)");
  auto* tee_prefix = app.add_flag_callback(
      "--tee-prefix", [&options] { options.prefix_output = true; },
      "Prefix each line of a rank's stdout/stderr with \"[rank R] \" (the default)");
  app.add_flag_callback(
         "--no-prefix", [&options] { options.prefix_output = false; },
         "Pass the ranks' output through untouched (ranks write to pgrun's stdout/stderr)")
      ->excludes(tee_prefix);
  app.add_option("--kill-grace,--kill_grace", options.kill_grace_s,
                 "Seconds between SIGTERM and SIGKILL when stopping ranks, in [0, 86400]")
      ->capture_default_str();

  std::string token_mode = "auto";
  app.add_option("--store-token,--store_token", token_mode,
                 "auto: give a single-node job a random PROCGROUP_STORE_TOKEN unless one is set; "
                 "off: never generate one")
      ->check(CLI::IsMember({"auto", "off"}))
      ->capture_default_str();

  std::string bind_mode = "none";
  app.add_option("--bind-to,--bind_to", bind_mode,
                 "none: ranks run wherever the kernel puts them (torchrun's behaviour); core: "
                 "each rank is bound to its own share of pgrun's CPUs (one core each with as "
                 "many ranks as CPUs), like mpirun --bind-to core")
      ->check(CLI::IsMember({"none", "core"}))
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return ParsedOptions{};
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what());
  }

  if (port_option->count() > 0) options.master_port = master_port;
  options.store_token = token_mode == "off" ? StoreTokenMode::kOff : StoreTokenMode::kAuto;
  options.bind_to = bind_mode == "core" ? BindMode::kCore : BindMode::kNone;
  if (standalone && options.nnodes != 1) {
    return usage_error("--standalone runs a single node, but --nnodes is " +
                       std::to_string(options.nnodes));
  }
  options.command = app.remaining(false);
  return validate(std::move(options));
}

}  // namespace procgroup::pgrun
