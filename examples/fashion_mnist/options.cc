#include "options.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <sstream>
#include <type_traits>

namespace fashion_mnist {
namespace {

constexpr int kMaxSteps = 1'000'000;  // --measure-overhead and its warm-up

constexpr const char* kDescription =
    "fashion_mnist: train an MLP with batch norm on Fashion-MNIST with data-parallel SGD over "
    "procgroup (launch with pgrun, torchrun, srun or mpirun; alone it runs as one rank).";

constexpr const char* kFooter =
    R"(Batch size and learning rate: every rank trains on --batch-size samples per step, so
the global batch is world_size x --batch-size. Gradients are averaged over the ranks, so one
step equals one step of a single process on the global batch: --lr is the learning rate for
that global batch. Going from 1 to N ranks at the same --batch-size multiplies the global
batch by N; keep the global batch (divide --batch-size by N) to keep the same training, or
scale --lr with it (the linear scaling rule) when you grow it.

Examples:
  pgrun --nproc-per-node 2 fashion_mnist --epochs 10 --csv run.csv --checkpoint run.ckpt
  pgrun --nproc-per-node 2 fashion_mnist --epochs 10 --checkpoint run.ckpt --resume
  pgrun --nproc-per-node 2 fashion_mnist --device cuda --epochs 10   # one GPU per rank
  PROCGROUP_BACKEND=ucx pgrun --nproc-per-node 2 fashion_mnist --measure-overhead 200)";

std::vector<int> parse_hidden(const std::string& text) {
  std::vector<int> sizes;
  size_t at = 0;
  while (at <= text.size() && !text.empty()) {
    const size_t comma = text.find(',', at);
    const std::string item = text.substr(at, comma == std::string::npos ? comma : comma - at);
    size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v <= 0) {
      throw CLI::ValidationError("--hidden", "'" + text + "' is not a list of positive sizes");
    }
    sizes.push_back(v);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return sizes;
}

// Accepts a number of type T in lo..hi and names that range when it refuses one: CLI11's
// PositiveNumber would print the bounds of a double (300 digits) for an int, and let NaN by.
template <class T>
CLI::Validator in_range(T lo, T hi) {
  const auto text = [](T v) {
    std::ostringstream out;
    out << v;
    return out.str();
  };
  const std::string range = text(lo) + ".." + text(hi);
  const char* kind = std::is_integral_v<T> ? "an integer" : "a number";
  return CLI::Validator(
      [=](std::string& input) -> std::string {
        T v{};
        // strtoull, under CLI11's conversion, takes "-1" for an unsigned as 2^64 - 1.
        const bool negative_unsigned = std::is_unsigned_v<T> && input.find('-') != input.npos;
        if (negative_unsigned || !CLI::detail::lexical_cast(input, v) ||
            !std::isfinite(static_cast<double>(v)) || v < lo || v > hi) {
          return "'" + input + "' is not " + kind + " in " + range;
        }
        return {};
      },
      "in " + range);
}

}  // namespace

std::optional<Options> parse_options(int argc, char** argv, int& exit_code) {
  Options o;
  TrainConfig& t = o.train;
  CLI::App app(kDescription, "fashion_mnist");
  app.footer(kFooter);
  // A repeated option takes its last value, as argparse does (scripts append overrides).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::string data = t.data_dir.string(), checkpoint, csv, hidden = "512,256";
  std::string schedule = "cosine", progress = "auto", final_state, stall_marker;

  app.add_option("--data", data, "Directory with the four Fashion-MNIST IDX files (.gz or not)")
      ->capture_default_str();
  app.add_option("--epochs", t.epochs, "Epochs to train to")
      ->capture_default_str()
      ->check(in_range(1, kMaxEpochs));
  app.add_option("--batch-size", t.batch_size,
                 "Samples per rank per step (global batch = "
                 "world_size x this)")
      ->capture_default_str()
      ->check(in_range(1, kMaxBatch));
  app.add_option("--lr", t.lr, "Learning rate for the global batch")
      ->capture_default_str()
      ->check(in_range(0.0f, 1000.0f));
  app.add_option("--lr-schedule", schedule, "constant, or cosine (to 0 at the last step)")
      ->capture_default_str()
      ->check(CLI::IsMember({"constant", "cosine"}));
  app.add_option("--momentum", t.sgd.momentum, "SGD momentum")
      ->capture_default_str()
      ->check(in_range(0.0f, 1.0f));
  app.add_option("--weight-decay", t.sgd.weight_decay, "L2 weight decay (Linear weights only)")
      ->capture_default_str()
      ->check(in_range(0.0f, 1.0f));
  app.add_option("--hidden", hidden, "Hidden layer sizes, comma-separated")->capture_default_str();
  app.add_option("--seed", t.seed, "Seed for the initial weights and the shuffling")
      ->capture_default_str()
      ->check(in_range(uint64_t{0}, std::numeric_limits<uint64_t>::max()));
  app.add_option("--device", t.device,
                 "cpu, or cuda: each rank trains on GPU LOCAL_RANK (cuBLAS and kernels) and the "
                 "group defaults to the nccl backend")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_flag("--sync-bn", t.sync_bn,
               "Batch-norm statistics over the global batch (ddp::SyncBatchNorm) instead of "
               "each rank's own");
  app.add_option("--checkpoint", checkpoint, "Checkpoint file, written by rank 0 every epoch");
  app.add_flag("--resume", t.resume, "Continue from --checkpoint when it exists");
  app.add_option("--csv", csv, "Per-epoch results (loss, accuracy, time, samples/s), rank 0");
  // An IDX dimension is a u32: no split holds more samples than that.
  const int64_t max_samples = std::numeric_limits<uint32_t>::max();
  app.add_option("--train-limit", t.train_limit, "Train on the first N samples only (0: all)")
      ->check(in_range(int64_t{0}, max_samples));
  app.add_option("--test-limit", t.test_limit, "Evaluate the first N test samples only (0: all)")
      ->check(in_range(int64_t{0}, max_samples));
  app.add_option("--progress", progress, "auto (bar on a terminal, else lines), bar, lines, none")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "bar", "lines", "none"}));
  app.add_option("--progress-interval", t.progress_interval_s, "Seconds between progress lines")
      ->capture_default_str()
      ->check(in_range(0.0, 86400.0));
  app.add_option("--eval-batch", t.eval_batch, "Rows per evaluation forward pass")
      ->capture_default_str()
      ->check(in_range(1, kMaxBatch));
  app.add_option("--blas-threads", o.blas_threads,
                 "OpenBLAS threads per rank (0: OPENBLAS_NUM_THREADS if set, else 1)")
      ->capture_default_str()
      ->check(in_range(0, 1024));
  bool copy_grads = false;
  app.add_flag("--no-bucket-view", copy_grads,
               "Copy gradients into the Reducer's buckets instead of living in them");
  const size_t max_bucket_kb = size_t{1} << 22;  // 4 GiB
  app.add_option("--first-bucket-kb", t.first_bucket_kb, "Reducer: first bucket's size")
      ->capture_default_str()
      ->check(in_range(size_t{1}, max_bucket_kb));
  app.add_option("--bucket-cap-kb", t.bucket_cap_kb, "Reducer: later buckets' size")
      ->capture_default_str()
      ->check(in_range(size_t{1}, max_bucket_kb));
  app.add_option("--comm-hook", t.comm_hook,
                 "Gradient reduction: allreduce (f32), or fp16 / bf16 (half the bytes, "
                 "half precision)")
      ->capture_default_str()
      ->check(CLI::IsMember({"allreduce", "fp16", "bf16"}));
  app.add_option("--measure-overhead", o.measure_overhead,
                 "Instead of training, time N steps with DDP and N under no_sync, interleaved, "
                 "and print (ddp - no_sync) / no_sync")
      ->check(in_range(0, kMaxSteps));
  app.add_option("--overhead-warmup", o.overhead_warmup, "Untimed steps before measuring")
      ->capture_default_str()
      ->check(in_range(0, kMaxSteps));
  app.add_option("--final-state", final_state, "Write the final parameters here (rank 0)");
  int64_t stall_at_step = 0;
  CLI::Option* stall =
      app.add_option("--stall-at-step", stall_at_step,
                     "Testing: --stall-rank stops before this global step and waits to "
                     "be killed")
          ->group("Testing")
          ->check(in_range(int64_t{0}, std::numeric_limits<int64_t>::max()));
  app.add_option("--stall-rank", t.stall_rank, "Testing: which rank stalls")
      ->group("Testing")
      ->check(in_range(0, std::numeric_limits<int>::max()));
  app.add_option("--stall-marker", stall_marker, "Testing: the stalled rank writes its pid here")
      ->group("Testing");

  try {
    app.parse(argc, argv);
    t.hidden = parse_hidden(hidden);
  } catch (const CLI::ParseError& e) {
    // CLI11 numbers its errors (105 for a value out of range); a usage error is 2, as for
    // the checks below and argparse.
    exit_code = app.exit(e) == 0 ? 0 : 2;
    return std::nullopt;
  }
  auto usage = [&](const std::string& message) {
    std::fprintf(stderr, "fashion_mnist: error: %s\nRun 'fashion_mnist --help' for usage.\n",
                 message.c_str());
    exit_code = 2;
    return std::nullopt;
  };
  if (t.resume && checkpoint.empty()) return usage("--resume needs --checkpoint PATH");
  if (stall->count() > 0) {
    if (stall_marker.empty()) return usage("--stall-at-step needs --stall-marker PATH");
    t.stall_at_step = stall_at_step;
  }
  t.data_dir = data;
  t.checkpoint = checkpoint;
  t.csv = csv;
  t.final_state = final_state;
  t.stall_marker = stall_marker;
  t.schedule = parse_schedule(schedule);
  t.progress = parse_progress_mode(progress);
  t.bucket_view = !copy_grads;
  exit_code = 0;
  return o;
}

}  // namespace fashion_mnist
