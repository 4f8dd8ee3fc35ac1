// A small real model for the ddp tests and workers: a 2-layer MLP (tanh hidden layer) with
// squared-error loss, a hand-written backward that reports each gradient as it completes,
// deterministic synthetic data, and SGD with momentum.
//
//   Mlp model = Mlp::make({}, 7);
//   Batch batch = make_batch(model.shape, 16, /*seed=*/1, /*step=*/0);
//   backward(model, batch, 1.0f / 16, grads, [&](size_t k) { reducer.mark_grad_ready(k); });
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "procgroup/ddp/tensor.h"

namespace procgroup::ddp::testing {

struct MlpShape {
  int in = 6, hidden = 10, out = 4;
};

// Parameters in registration order: w1 (hidden x in), b1, w2 (out x hidden), b2.
constexpr size_t kMlpParams = 4;
using Grads = std::array<std::span<float>, kMlpParams>;

struct Mlp {
  MlpShape shape;
  std::array<std::vector<float>, kMlpParams> params;
  static Mlp make(MlpShape shape, uint64_t seed);
  std::vector<float> flat() const;
};

struct Batch {
  int in = 0, out = 0, rows = 0;
  std::vector<float> x, t;  // rows x in, rows x out
  Batch slice(int first_row, int count) const;
};

Batch make_batch(const MlpShape& shape, int rows, uint64_t seed, uint64_t step);

// grads[k] += scale * d/d(param k) of sum over rows of 0.5 * |y - t|^2; ready(k) is called
// as soon as gradient k is complete: 3 and 2 (layer 2), then 1 and 0.
void backward(const Mlp& model, const Batch& batch, float scale, const Grads& grads,
              const std::function<void(size_t)>& ready);

class Sgd {
 public:
  Sgd(const Mlp& model, float lr, float momentum);
  void step(Mlp& model, const Grads& grads);
  std::array<std::vector<float>, kMlpParams>& velocity() { return velocity_; }

 private:
  float lr_, momentum_;
  std::array<std::vector<float>, kMlpParams> velocity_;
};

// Parameters for the Reducer (grads may be empty spans with gradient_as_bucket_view).
std::vector<Parameter> parameters(Mlp& model, const Grads& grads);

// Owned gradient storage shaped like the model.
struct GradStore {
  explicit GradStore(const Mlp& model);
  std::array<std::vector<float>, kMlpParams> data;
  Grads spans();
  void zero();
};

}  // namespace procgroup::ddp::testing
