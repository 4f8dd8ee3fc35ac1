// overhead.h — what data parallelism costs per step: the same training step timed with the
// Reducer communicating (DDP) and under no_sync (no gradient communication), interleaved
// step by step so the machine's noise hits both alike. A step's time is the slowest rank's;
// each figure is the median over the measured steps.
//
//   OverheadResult r = measure_overhead(group, trainer, /*steps=*/100, /*warmup=*/10);
//   std::printf("+%.1f%%\n", 100 * r.ratio);   // (ddp - no_sync) / no_sync
#pragma once

#include <cstddef>

#include "trainer.h"

namespace fashion_mnist {

struct OverheadResult {
  int steps = 0;
  double ddp_ms = 0, no_sync_ms = 0;
  double ratio = 0;                    // (ddp_ms - no_sync_ms) / no_sync_ms
  double allreduce_ms = 0;             // one blocking allreduce of every gradient at once, alone
  StepTimes ddp_parts, no_sync_parts;  // medians of rank 0's parts of a step
  size_t gradient_bytes = 0;
};

// Collective; trains the model for 2 * (steps + warmup) steps (its state changes).
OverheadResult measure_overhead(const procgroup::Group& group, Trainer& trainer, int steps,
                                int warmup);

}  // namespace fashion_mnist
