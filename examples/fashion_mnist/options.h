// options.h — the fashion_mnist command line (CLI11), into a TrainConfig plus the modes.
//
//   std::optional<Options> o = parse_options(argc, argv, exit_code);  // nullopt: exit
#pragma once

#include <optional>

#include "trainer.h"

namespace fashion_mnist {

struct Options {
  TrainConfig train;
  int measure_overhead = 0;  // > 0: time this many DDP and no_sync steps instead of training
  int overhead_warmup = 10;
  int blas_threads = 0;  // 0: OPENBLAS_NUM_THREADS when set, else 1
};

// nullopt after --help (exit_code 0) or a usage error (message printed, exit_code 2).
std::optional<Options> parse_options(int argc, char** argv, int& exit_code);

}  // namespace fashion_mnist
