// fashion_mnist: data-parallel training of an MLP on Fashion-MNIST over procgroup, the
// project's main job. See docs/training.md.
//
//   pgrun --nproc-per-node 2 build/bin/fashion_mnist --epochs 10 --csv run.csv
//         --checkpoint run.ckpt [--resume] [--sync-bn] [--device cuda] [--measure-overhead 200]
#include <cblas.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <memory>
#include <string>

#include "idx.h"
#include "ops.h"
#include "options.h"
#include "overhead.h"
#include "trainer.h"

namespace fm = fashion_mnist;

namespace {

char g_sigterm_message[160] = "fashion_mnist: stopped by SIGTERM\n";

// pgrun stops the other ranks with SIGTERM when one fails: say so instead of vanishing.
void on_sigterm(int) {
  const ssize_t ignored = write(STDERR_FILENO, g_sigterm_message, std::strlen(g_sigterm_message));
  (void)ignored;
  _exit(128 + SIGTERM);
}

bool launched() {
  for (const char* v : {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"}) {
    const char* s = std::getenv(v);
    if (s != nullptr && *s != '\0') return true;
  }
  return false;
}

// The first of the launchers' variables that is set, else fallback.
int env_int(std::initializer_list<const char*> names, int fallback) {
  for (const char* v : names) {
    const char* s = std::getenv(v);
    if (s != nullptr && *s != '\0') return std::atoi(s);
  }
  return fallback;
}

// Run alone (not under a launcher), the program is one rank of a group of one. The device
// type picks the default backend (nccl for CUDA); PROCGROUP_BACKEND still overrides it.
procgroup::Group make_group(pg_device_type_t device_type) {
  pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
  o.device_type = device_type;
  if (!launched()) {
    o.rank = 0;
    o.size = 1;
  }
  return procgroup::Group(o);
}

int blas_threads(int requested) {
  if (requested > 0) return requested;
  const char* env = std::getenv("OPENBLAS_NUM_THREADS");
  return env != nullptr && std::atoi(env) > 0 ? std::atoi(env) : 1;
}

int run(const fm::Options& options, int& rank) {
  const auto start = std::chrono::steady_clock::now();
  openblas_set_num_threads(blas_threads(options.blas_threads));
  const fm::TrainConfig& c = options.train;
  // The device first: a CUDA rank selects its GPU before the group (NCCL) sees it.
  const int local_rank =
      launched() ? env_int({"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}, 0) : 0;
  const int local_size =
      launched() ? env_int({"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"}, 1) : 1;
  const std::unique_ptr<fm::Ops> ops = fm::make_ops(c.device, local_rank, local_size);
  procgroup::Group group = make_group(ops->device().type);
  rank = group.rank();
  std::snprintf(g_sigterm_message, sizeof g_sigterm_message,
                "fashion_mnist: rank %d: stopped by SIGTERM (pgrun stops every rank when one "
                "fails; see the first failing rank's error above)\n",
                rank);
  const fm::FashionMnist data = fm::load_fashion_mnist(c.data_dir, c.train_limit, c.test_limit);
  fm::Trainer trainer(group, c, data, *ops);
  const bool lead = rank == 0;
  if (lead) {
    std::string layers = std::to_string(data.train.pixels);
    for (int h : c.hidden) layers += "-" + std::to_string(h);
    std::printf(
        "fashion_mnist: %d rank(s) on %s, global batch %d (%d per rank), lr %g %s, %s "
        "batch norm\n  data %lld train / %lld test samples from %s; MLP %s-%d; device %s\n",
        group.size(), std::string(group.backend()).c_str(), c.batch_size * group.size(),
        c.batch_size, c.lr, c.schedule == fm::Schedule::kCosine ? "cosine" : "constant",
        c.sync_bn ? "synchronised (SyncBatchNorm)" : "per-rank",
        static_cast<long long>(data.train.size), static_cast<long long>(data.test.size),
        c.data_dir.c_str(), layers.c_str(), fm::kClasses, ops->describe().c_str());
    std::fflush(stdout);
  }

  if (options.measure_overhead > 0) {
    const fm::OverheadResult r =
        fm::measure_overhead(group, trainer, options.measure_overhead, options.overhead_warmup);
    if (lead) {
      std::printf(
          "overhead: %s, %d ranks, batch %d/rank, %d steps each: DDP %.3f ms/step, no_sync "
          "%.3f ms/step, overhead %+.1f%% (one allreduce of all %.2f MB of gradients alone: "
          "%.3f ms)\n",
          std::string(group.backend()).c_str(), group.size(), c.batch_size, r.steps, r.ddp_ms,
          r.no_sync_ms, 100 * r.ratio, r.gradient_bytes / 1e6, r.allreduce_ms);
      for (const auto& [name, p] : {std::pair{"DDP", r.ddp_parts}, {"no_sync", r.no_sync_parts}}) {
        std::printf(
            "overhead: rank 0 %-7s step: forward+backward %.3f ms (of which "
            "mark_grad_ready %.3f ms), finalize %.3f ms, update %.3f ms\n",
            name, p.compute_ms, p.mark_ms, p.finalize_ms, p.update_ms);
      }
    }
  } else {
    const auto records = trainer.run();
    if (lead && !records.empty()) {
      const double total =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("done: test accuracy %.2f%% after %d epochs (%.1f s in this run)\n",
                  100 * records.back().test_acc, records.back().epoch, total);
    } else if (lead) {
      std::printf("done: nothing to do, %d epochs already in the checkpoint\n", c.epochs);
    }
  }
  group.destroy();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int exit_code = 0;
  const auto options = fm::parse_options(argc, argv, exit_code);
  if (!options) return exit_code;
  struct sigaction sa {};
  sa.sa_handler = on_sigterm;
  sigaction(SIGTERM, &sa, nullptr);
  int rank = -1;
  try {
    return run(*options, rank);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    if (rank >= 0) {
      std::fprintf(stderr, "fashion_mnist: rank %d: error: %s\n", rank, e.what());
    } else {
      std::fprintf(stderr, "fashion_mnist: error: %s\n", e.what());
    }
    return 1;
  }
}
