// How much communication the Reducer hides behind backward. A synthetic model of many
// layers, each with a simulated backward compute time, trains one step at a time in three
// ways, interleaved step by step so the machine's noise hits all three alike:
//   none     backward only (no communication): the floor
//   naive    backward, then allreduce every gradient (all in flight at once), then divide
//   bucketed the Reducer's buckets, but every gradient marked only after backward ends
//   overlap  backward marking each gradient ready on a ddp::Reducer, then finalize()
// hidden = (naive - overlap) / (naive - none): the share of the naive approach's
// communication time that the Reducer removes from the step; bucketed separates what the
// larger messages gain from what the overlap with backward gains.
//
//   pgrun --nproc-per-node 2 ddp_overlap [--layers 32] [--layer-kb 1024] [--compute-ms 2]
//       [--steps 8] [--busy] [--copy] [--first-bucket-kb 1024] [--bucket-cap-kb 25600]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "procgroup/ddp/reducer.h"

namespace ddp = procgroup::ddp;
using Clock = std::chrono::steady_clock;

namespace {

struct Config {
  int layers = 32;
  size_t layer_kb = 1024;
  double compute_ms = 2.0;
  int steps = 8;
  int warmup = 2;
  bool busy = false;  // spin instead of sleeping (competes with communication for CPU)
  bool copy = false;  // gradients copied into buckets instead of living in them
  size_t first_bucket_kb = 1024;
  size_t bucket_cap_kb = 25 * 1024;
};

Config parse(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? argv[++i] : "0"; };
    if (a == "--layers")
      c.layers = std::atoi(next());
    else if (a == "--layer-kb")
      c.layer_kb = std::strtoull(next(), nullptr, 10);
    else if (a == "--compute-ms")
      c.compute_ms = std::atof(next());
    else if (a == "--steps")
      c.steps = std::atoi(next());
    else if (a == "--warmup")
      c.warmup = std::atoi(next());
    else if (a == "--busy")
      c.busy = true;
    else if (a == "--copy")
      c.copy = true;
    else if (a == "--first-bucket-kb")
      c.first_bucket_kb = std::strtoull(next(), nullptr, 10);
    else if (a == "--bucket-cap-kb")
      c.bucket_cap_kb = std::strtoull(next(), nullptr, 10);
    else {
      std::fprintf(stderr, "ddp_overlap: unknown argument %s\n", a.c_str());
      std::exit(2);
    }
  }
  return c;
}

void compute(const Config& c) {
  const auto d = std::chrono::duration<double, std::milli>(c.compute_ms);
  if (!c.busy) {
    std::this_thread::sleep_for(d);
    return;
  }
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(d);
  while (Clock::now() < until) {
  }
}

// Backward of layer l writes its gradient (the layers run last to first).
void write_grad(std::span<float> g, int l, int step) {
  std::fill(g.begin(), g.end(), static_cast<float>(l + step));
}

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Config c = parse(argc, argv);
    procgroup::Group group = procgroup::Group::from_env();
    const int rank = group.rank(), size = group.size();
    const size_t n = c.layer_kb * 1024 / sizeof(float);
    std::vector<std::vector<float>> values(c.layers, std::vector<float>(n, 0.0f));
    std::vector<std::vector<float>> grads(c.layers, std::vector<float>(n, 0.0f));
    std::vector<ddp::Parameter> params;
    for (int l = 0; l < c.layers; ++l) {
      params.push_back(ddp::Parameter::of("layer" + std::to_string(l), std::span(values[l]),
                                          std::span(grads[l])));
    }
    ddp::ReducerOptions o;
    o.gradient_as_bucket_view = !c.copy;
    o.first_bucket_bytes = c.first_bucket_kb * 1024;
    o.bucket_cap_bytes = c.bucket_cap_kb * 1024;
    ddp::Reducer reducer(group, params, o);

    std::vector<double> none, naive, bucketed, overlap;
    for (int step = 0; step < c.warmup + c.steps; ++step) {
      const bool keep = step >= c.warmup;
      group.barrier().wait();
      auto t = Clock::now();
      for (int l = c.layers - 1; l >= 0; --l) {
        compute(c);
        write_grad(grads[l], l, step);
      }
      if (keep) none.push_back(ms_since(t));

      group.barrier().wait();
      t = Clock::now();
      for (int l = c.layers - 1; l >= 0; --l) {
        compute(c);
        write_grad(grads[l], l, step);
      }
      std::vector<procgroup::Work> works;
      for (int l = 0; l < c.layers; ++l) works.push_back(group.allreduce(std::span(grads[l])));
      for (int l = 0; l < c.layers; ++l) {
        works[l].wait();
        for (float& x : grads[l]) x /= static_cast<float>(size);
      }
      if (keep) naive.push_back(ms_since(t));

      for (bool overlapped : {false, true}) {
        group.barrier().wait();
        t = Clock::now();
        for (int l = c.layers - 1; l >= 0; --l) {
          compute(c);
          write_grad(reducer.grad_as<float>(l), l, step);
          if (overlapped) reducer.mark_grad_ready(l);
        }
        for (int l = c.layers - 1; l >= 0 && !overlapped; --l) reducer.mark_grad_ready(l);
        reducer.finalize();
        if (keep) (overlapped ? overlap : bucketed).push_back(ms_since(t));
        if (!overlapped) reducer.zero_grad();
      }
      // Every rank wrote the same values, so the averages equal them: a check that it all ran.
      for (int l : {0, c.layers - 1}) {
        if (reducer.grad_as<float>(l)[n - 1] != static_cast<float>(l + step)) {
          std::fprintf(stderr, "rank %d: wrong average in layer %d\n", rank, l);
          return 1;
        }
      }
      reducer.zero_grad();
    }
    if (rank == 0) {
      const double t_none = median(none), t_naive = median(naive), t_overlap = median(overlap);
      const double t_bucketed = median(bucketed);
      const double comm = t_naive - t_none, exposed = t_overlap - t_none;
      std::printf(
          "ddp_overlap: %d ranks on %s, %d layers x %zu KiB = %.1f MiB of gradients, %.2f ms "
          "%s compute per layer, %zu buckets (first %zu KiB, cap %zu KiB, %s), median of %d "
          "steps\n",
          size, std::string(group.backend()).c_str(), c.layers, c.layer_kb,
          c.layers * c.layer_kb / 1024.0, c.compute_ms, c.busy ? "busy" : "sleep",
          reducer.num_buckets(), c.first_bucket_kb, c.bucket_cap_kb,
          c.copy ? "copied" : "bucket views", c.steps);
      std::printf("  step time, no communication : %8.2f ms\n", t_none);
      std::printf("  step time, naive allreduce   : %8.2f ms  (communication adds %.2f ms)\n",
                  t_naive, comm);
      std::printf("  step time, Reducer, no overlap: %7.2f ms  (communication adds %.2f ms)\n",
                  t_bucketed, t_bucketed - t_none);
      std::printf("  step time, overlapped Reducer: %8.2f ms  (communication adds %.2f ms)\n",
                  t_overlap, exposed);
      std::printf("  hidden fraction of the naive communication time: %.2f (target >= 0.50)\n",
                  comm > 0 ? (comm - exposed) / comm : 0.0);
    }
    group.destroy();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp_overlap: %s\n", e.what());
    return 1;
  }
}
