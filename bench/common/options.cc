// Command-line parsing for the collective benchmarks (see options.h).
#include "options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>

namespace procgroup::bench {
namespace {

constexpr const char* kFooter =
    R"(Columns: size is the largest buffer a rank passes (bytes); count the per-rank
element count of the call; time the mean per operation, taken over -n iterations after a
barrier and aggregated over ranks by -a; algbw = size / time; busbw = algbw * factor
(allreduce 2(n-1)/n; allgather, reduce_scatter, alltoall, gather, scatter (n-1)/n;
broadcast, reduce, sendrecv 1); #wrong the elements that differ from the host's expected
values, summed over ranks (-c 1). The exit status is 1 if any element was wrong.
See docs/benchmarks.md.)";

const char* coll_description(Coll op) {
  switch (op) {
    case Coll::kAllreduce: return "every rank gets the reduction of all inputs";
    case Coll::kAllgather: return "every rank gets every rank's block";
    case Coll::kReduceScatter: return "rank i gets block i of the reduction";
    case Coll::kBroadcast: return "the root's buffer goes to every rank";
    case Coll::kReduce: return "the root gets the reduction of all inputs";
    case Coll::kAlltoall: return "block j of rank i goes to block i of rank j";
    case Coll::kGather: return "the root gets every rank's block";
    case Coll::kScatter: return "block i of the root goes to rank i";
    case Coll::kSendrecv: return "each rank sends to rank+1 and receives from rank-1";
  }
  return "";
}

ParsedOptions usage_error(const ToolInfo& tool, const std::string& message) {
  std::fprintf(stderr, "%s: error: %s\nRun '%s --help' for usage.\n", tool.name, message.c_str(),
               tool.name);
  ParsedOptions parsed;
  parsed.exit_code = kUsageExitCode;
  return parsed;
}

template <typename T, size_t N>
std::vector<std::string> names_of(const std::array<T, N>& all, const char* (*name_of)(T)) {
  std::vector<std::string> names;
  names.reserve(N + 1);
  for (T v : all) names.emplace_back(name_of(v));
  names.emplace_back("all");
  return names;
}

// Names (already validated) to values, in the order given without repeats; "all" is every value.
template <typename T, size_t N>
std::vector<T> expand(const std::vector<std::string>& names, const std::array<T, N>& all,
                      std::optional<T> (*parse)(std::string_view)) {
  std::vector<T> values;
  for (const std::string& name : names) {
    if (name == "all") return std::vector<T>(all.begin(), all.end());
    const T v = *parse(name);
    if (std::find(values.begin(), values.end(), v) == values.end()) values.push_back(v);
  }
  return values;
}

}  // namespace

ParsedOptions parse_options(int argc, char** argv, const ToolInfo& tool) {
  Options o;
  CLI::App app(tool.description, tool.name);
  app.require_subcommand(1, 1);
  app.fallthrough();  // options after the subcommand belong to the main command
  app.footer(kFooter);
  for (Coll c : kAllColls) {
    app.add_subcommand(coll_name(c), coll_description(c))->callback([&o, c] { o.op = c; });
  }
  std::vector<std::string> dtypes{"f32"}, redops{"sum"};
  int check = 1, blocking = 0, aggregate = 3;
  const auto size = CLI::AsSizeValue(false);
  app.add_option("-b,--minbytes", o.min_bytes, "smallest size (bytes; K, M, G suffixes)")
      ->transform(size)
      ->capture_default_str();
  app.add_option("-e,--maxbytes", o.max_bytes, "largest size")
      ->transform(size)
      ->capture_default_str();
  app.add_option("-f,--stepfactor", o.factor, "size multiplier between rows")
      ->check(CLI::Range(uint64_t{2}, uint64_t{1} << 20))
      ->capture_default_str();
  app.add_option("-n,--iters", o.iters, "timed iterations per size")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  app.add_option("-w,--warmup_iters", o.warmup, "untimed iterations before each timed loop")
      ->check(CLI::Range(0, 1 << 24))
      ->capture_default_str();
  app.add_option("-d,--datatype", dtypes,
                 "element type(s): f32 f64 f16 bf16 i8 u8 i32 i64 or nccl-tests' names (float "
                 "double half bfloat16 int8 uint8 int32 int64), a comma list, or all")
      ->delimiter(',')
      ->check([](const std::string& name) {
        return name == "all" || parse_dtype(name) ? std::string() : dtype_error(name);
      })
      ->capture_default_str();
  app.add_option("-o,--op", redops,
                 "reduce op(s) (reducing collectives only): a name, a comma list, or all")
      ->delimiter(',')
      ->check(CLI::IsMember(names_of(kAllRedOps, redop_name)))
      ->capture_default_str();
  app.add_option("-r,--root", o.root, "root of broadcast, reduce, gather, scatter")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("-c,--check", check, "check every element of every result (0/1)")
      ->check(CLI::Range(0, 1))
      ->capture_default_str();
  app.add_option("-z,--blocking", blocking,
                 "0: issue all iterations, then wait for them; 1: wait for each before the next")
      ->check(CLI::Range(0, 1))
      ->capture_default_str();
  app.add_option("-a,--average", aggregate,
                 "time over ranks: 0 rank 0's, 1 mean, 2 min, 3 max (the slowest rank)")
      ->check(CLI::Range(0, 3))
      ->capture_default_str();
  app.add_flag("--reference", o.reference,
               "also time this machine's memory at each size, on every rank at once: memcpy and "
               "an f32 reduce-into (dst[i] += src[i]) of size bytes, in GB/s; the limit beside "
               "the collective's busbw");
  app.add_option("--json", o.json_path, "also write the results as JSON to FILE (rank 0)");
  app.add_option("--csv", o.csv_path, "also write the results as CSV to FILE (rank 0)");
  if (tool.offers_direct) {
    app.add_flag("--direct", o.direct,
                 "also time each size calling the library directly (Gloo, same algorithm as the "
                 "gloo backend; NCCL with -g cuda) and print the procgroup/raw busbw ratio and "
                 "the time procgroup adds");
  }
  if (tool.offers_device) {
    app.add_option("-g,--device", o.device,
                   "cpu: host buffers; cuda: buffers on GPU LOCAL_RANK, timed with CUDA events, "
                   "the nccl backend by default")
        ->check(CLI::IsMember({"cpu", "cuda"}))
        ->capture_default_str();
  }
  app.add_option("--corrupt-rank", o.corrupt_rank,
                 "test hook: this rank overwrites input element 0 before each checked run, so "
                 "the check must report wrong elements")
      ->group("Test hooks");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {  // --help
      app.exit(e);
      return ParsedOptions{o, false, 0};
    }
    return usage_error(tool, e.what());
  }
  if (o.min_bytes == 0) return usage_error(tool, "-b/--minbytes must be at least 1");
  if (o.max_bytes < o.min_bytes) return usage_error(tool, "-e/--maxbytes is below -b/--minbytes");
  o.dtypes = expand(dtypes, kAllDtypes, parse_dtype);
  o.redops = expand(redops, kAllRedOps, parse_redop);
  o.check = check != 0;
  o.blocking = blocking != 0;
  o.aggregate = static_cast<TimeAggregate>(aggregate);
  return ParsedOptions{o, true, 0};
}

}  // namespace procgroup::bench
