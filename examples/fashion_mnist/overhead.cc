#include "overhead.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace fashion_mnist {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// Median of the slowest rank's times, step by step (reduced on the model's device, as the
// group may reduce nothing else).
double median_of_max(const procgroup::Group& group, const Ops& ops, std::vector<double> times) {
  allreduce_values(group, ops, times, procgroup::ReduceOp::kMax);
  std::sort(times.begin(), times.end());
  return times.empty() ? 0 : times[times.size() / 2];
}

StepTimes median_parts(const std::vector<StepTimes>& parts) {
  auto median = [&](double StepTimes::*field) {
    std::vector<double> v;
    for (const StepTimes& p : parts) v.push_back(p.*field);
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
  };
  return {median(&StepTimes::compute_ms), median(&StepTimes::mark_ms),
          median(&StepTimes::finalize_ms), median(&StepTimes::update_ms)};
}

}  // namespace

OverheadResult measure_overhead(const procgroup::Group& group, Trainer& trainer, int steps,
                                int warmup) {
  const std::vector<uint64_t> indices = trainer.epoch_indices(0);
  const int batch = static_cast<int>(std::min<size_t>(trainer.batch_size(), indices.size()));
  const size_t batches = indices.size() / batch;  // full batches only
  std::vector<double> ddp, no_sync, raw;
  std::vector<StepTimes> ddp_parts, no_sync_parts;
  size_t next = 0;
  auto timed_step = [&](bool sync) {
    const size_t first = (next++ % batches) * batch;
    group.barrier().wait();
    const auto t = Clock::now();
    if (sync) {
      trainer.step(indices, first, batch, 0.01f);
    } else {
      auto guard = trainer.reducer().no_sync();
      trainer.step(indices, first, batch, 0.01f);
    }
    return ms_since(t);
  };

  Mlp& model = trainer.model();
  size_t numel = 0;
  for (size_t i = 0; i < model.num_parameters(); ++i) numel += model.grad(i).size();
  // On the model's device, as the Reducer's buckets are.
  const Ops& ops = trainer.ops();
  DeviceArray all(ops, numel);
  ops.fill(all.span(), 1.0f);
  const pg_buffer_t all_buffer = procgroup::ddp::TensorRef::of(all.span(), ops.device()).buffer();

  for (int i = 0; i < warmup + steps; ++i) {
    const bool keep = i >= warmup;
    // Alternate which mode goes first so neither always follows the other.
    for (bool sync : {i % 2 == 0, i % 2 != 0}) {
      const double ms = timed_step(sync);
      if (!keep) continue;
      (sync ? ddp : no_sync).push_back(ms);
      (sync ? ddp_parts : no_sync_parts).push_back(trainer.last_step_times());
    }
    group.barrier().wait();
    const auto t = Clock::now();
    group.run(pg_allreduce, nullptr, &all_buffer, procgroup::op_options()).wait();
    ops.synchronize();
    if (keep) raw.push_back(ms_since(t));
  }
  OverheadResult r;
  r.steps = steps;
  r.ddp_ms = median_of_max(group, ops, ddp);
  r.no_sync_ms = median_of_max(group, ops, no_sync);
  r.ratio = r.no_sync_ms > 0 ? (r.ddp_ms - r.no_sync_ms) / r.no_sync_ms : 0;
  r.allreduce_ms = median_of_max(group, ops, raw);
  r.gradient_bytes = numel * sizeof(float);
  r.ddp_parts = median_parts(ddp_parts);
  r.no_sync_parts = median_parts(no_sync_parts);
  return r;
}

}  // namespace fashion_mnist
