// A ddp training program for the real-process tests, launched with pgrun (gloo):
//
//   ddp_worker equivalence [view]     train 6 steps; compare with a one-process reference
//   ddp_worker mismatch               rank 1 registers other parameters; expect the error
//   ddp_worker train --steps N --ckpt PATH --every K --out PATH [--stall-at S --marker PATH]
//       train N steps with checkpoints every K steps, resuming from PATH when it exists; rank 0
//       writes the final parameters to --out. With --stall-at, rank 0 writes its pid to
//       --marker after step S and stops there, for a test to kill it.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "mlp.h"
#include "procgroup/ddp/checkpoint.h"
#include "procgroup/ddp/reducer.h"
#include "procgroup/ddp/sampler.h"

namespace ddp = procgroup::ddp;
using ddp::testing::Batch;
using ddp::testing::Grads;
using ddp::testing::Mlp;

namespace {

constexpr int kRows = 4;  // per rank per step
constexpr float kLr = 0.1f, kMomentum = 0.9f;

Grads reducer_grads(ddp::Reducer& reducer) {
  Grads g;
  for (size_t k = 0; k < ddp::testing::kMlpParams; ++k) g[k] = reducer.grad_as<float>(k);
  return g;
}

void train_step(Mlp& model, ddp::testing::Sgd& sgd, ddp::Reducer& reducer, const Batch& mine) {
  ddp::testing::backward(model, mine, 1.0f / mine.rows, reducer_grads(reducer),
                         [&](size_t k) { reducer.mark_grad_ready(k); });
  reducer.finalize();
  sgd.step(model, reducer_grads(reducer));
  reducer.zero_grad();
}

int equivalence(procgroup::Group& group, bool view) {
  const int rank = group.rank(), size = group.size();
  Mlp model = Mlp::make({}, 3), ref = Mlp::make({}, 3);
  ddp::testing::GradStore own(model), ref_grads(ref);
  ddp::ReducerOptions o;
  o.gradient_as_bucket_view = view;
  o.first_bucket_bytes = 20;  // several buckets
  o.bucket_cap_bytes = 250;
  ddp::Reducer reducer(group, ddp::testing::parameters(model, view ? Grads{} : own.spans()), o);
  ddp::testing::Sgd sgd(model, kLr, kMomentum), ref_sgd(ref, kLr, kMomentum);
  double worst = 0;
  for (int step = 0; step < 6; ++step) {
    const Batch batch = ddp::testing::make_batch(model.shape, size * kRows, 5, step);
    train_step(model, sgd, reducer, batch.slice(rank * kRows, kRows));
    ref_grads.zero();
    ddp::testing::backward(ref, batch, 1.0f / batch.rows, ref_grads.spans(), [](size_t) {});
    ref_sgd.step(ref, ref_grads.spans());
    const auto a = model.flat(), b = ref.flat();
    for (size_t i = 0; i < a.size(); ++i) {
      worst = std::max(worst, std::abs(double{a[i]} - b[i]) / (1 + std::abs(double{b[i]})));
    }
  }
  const bool ok = worst < 1e-5;
  std::printf("rank %d equivalence %s (%d ranks, max relative difference %.2g)\n", rank,
              ok ? "ok" : "WRONG", size, worst);
  return ok ? 0 : 1;
}

int mismatch(procgroup::Group& group) {
  Mlp model = Mlp::make({}, 1);
  ddp::testing::GradStore grads(model);
  auto params = ddp::testing::parameters(model, grads.spans());
  if (group.rank() == 1) params[2].name = "fc2.kernel";
  try {
    ddp::Reducer reducer(group, params);
  } catch (const ddp::Error& e) {
    std::printf("rank %d clear error: %s\n", group.rank(), e.what());
    return 0;
  }
  std::printf("rank %d: the Reducer was built despite different parameters\n", group.rank());
  return 1;
}

struct TrainArgs {
  int steps = 0, every = 0, stall_at = -1;
  std::string ckpt, out, marker;
};

int train(procgroup::Group& group, const TrainArgs& args) {
  const int rank = group.rank(), size = group.size();
  Mlp model = Mlp::make({}, 9 + rank);  // rank 0's values win at construction
  ddp::ReducerOptions o;
  o.gradient_as_bucket_view = true;
  ddp::Reducer reducer(group, ddp::testing::parameters(model, Grads{}), o);
  ddp::testing::Sgd sgd(model, kLr, kMomentum);
  int64_t step = 0;
  std::vector<ddp::NamedTensor> state;
  for (size_t k = 0; k < ddp::testing::kMlpParams; ++k) {
    const std::string name = reducer.parameter(k).name;
    state.push_back({name, ddp::TensorRef::of(std::span(model.params[k]))});
    state.push_back(
        {"sgd." + name + ".velocity", ddp::TensorRef::of(std::span(sgd.velocity()[k]))});
  }
  state.push_back({"step", ddp::TensorRef::of(std::span(&step, 1))});
  if (ddp::load_checkpoint(group, args.ckpt, state)) {
    std::printf("rank %d resumed at step %lld\n", rank, static_cast<long long>(step));
  }
  // A fixed dataset, walked epoch by epoch through the sampler.
  constexpr int kDataset = 40;
  const Batch data = ddp::testing::make_batch(model.shape, kDataset, 21, 0);
  ddp::DistributedSampler sampler(kDataset, size, rank, {.shuffle = true, .seed = 4});
  const int64_t steps_per_epoch = static_cast<int64_t>(sampler.num_samples()) / kRows;
  for (; step < args.steps;) {
    const auto indices = sampler.indices(static_cast<uint64_t>(step / steps_per_epoch));
    Batch mine{data.in, data.out, kRows, {}, {}};
    for (int r = 0; r < kRows; ++r) {
      const Batch row =
          data.slice(static_cast<int>(indices[(step % steps_per_epoch) * kRows + r]), 1);
      mine.x.insert(mine.x.end(), row.x.begin(), row.x.end());
      mine.t.insert(mine.t.end(), row.t.begin(), row.t.end());
    }
    train_step(model, sgd, reducer, mine);
    ++step;
    if (step % args.every == 0) ddp::save_checkpoint(group, args.ckpt, state);
    if (step == args.stall_at && rank == 0) {
      std::ofstream(args.marker + ".part") << ::getpid() << "\n";
      std::rename((args.marker + ".part").c_str(), args.marker.c_str());
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // killed here
    }
  }
  if (rank == 0) ddp::write_checkpoint_file(args.out, state);
  std::printf("rank %d done after step %lld\n", rank, static_cast<long long>(step));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    procgroup::Group group = procgroup::Group::from_env();
    int rc = 2;
    if (mode == "equivalence") {
      rc = equivalence(group, argc > 2 && std::strcmp(argv[2], "view") == 0);
    } else if (mode == "mismatch") {
      rc = mismatch(group);
    } else if (mode == "train") {
      TrainArgs a;
      for (int i = 2; i + 1 < argc; i += 2) {
        const std::string key = argv[i], value = argv[i + 1];
        if (key == "--steps")
          a.steps = std::stoi(value);
        else if (key == "--every")
          a.every = std::stoi(value);
        else if (key == "--stall-at")
          a.stall_at = std::stoi(value);
        else if (key == "--ckpt")
          a.ckpt = value;
        else if (key == "--out")
          a.out = value;
        else if (key == "--marker")
          a.marker = value;
      }
      rc = train(group, a);
    } else {
      std::fprintf(stderr, "usage: ddp_worker equivalence [view] | mismatch | train ...\n");
    }
    group.destroy();
    return rc;
  } catch (const std::exception& e) {
    std::printf("ddp_worker error: %s\n", e.what());
    return 1;
  }
}
