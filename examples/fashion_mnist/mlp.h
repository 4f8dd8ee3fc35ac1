// mlp.h — the classifier: inputs -> [Linear -> BatchNorm -> ReLU] per hidden layer ->
// Linear -> logits, trained with softmax cross-entropy. The hidden Linear layers have no
// bias (the BatchNorm after them makes one redundant).
//
// backward() is written by hand and reports each parameter's gradient the moment it is
// complete, last layer first, so a ddp::Reducer can start reducing a bucket while the
// earlier layers' gradients are still being computed:
//
// Arrays live where the Ops puts them (ops.h): host memory for cpu_ops(), GPU memory for the
// CUDA one; value(), grad(), forward()'s input and output then point into GPU memory.
//
//   Mlp model({.hidden = {512, 256}}, /*seed=*/1, [](int c) { return make_local_batch_norm(c); });
//   ddp::Reducer reducer(group, model.parameters());
//   auto logits = model.forward(x, n);
//   softmax_cross_entropy(logits.data(), labels, n, 10, 1.0f / n, dlogits.data());
//   model.backward(dlogits, [&](size_t i) { reducer.mark_grad_ready(i); });
//   reducer.finalize();
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "layers.h"
#include "ops.h"
#include "procgroup/ddp/checkpoint.h"
#include "procgroup/ddp/tensor.h"

namespace fashion_mnist {

struct MlpShape {
  int inputs = 784;
  std::vector<int> hidden = {512, 256};
  int classes = 10;
};

using BatchNormFactory = std::function<std::unique_ptr<BatchNorm>(int channels)>;

class Mlp {
 public:
  // Weights drawn from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (PyTorch's default) by a generator
  // seeded with (seed, parameter index): the same seed gives the same model everywhere, on
  // every device. make_bn's layers must keep their arrays on ops' device; ops must outlive
  // the model.
  Mlp(MlpShape shape, uint64_t seed, const BatchNormFactory& make_bn, const Ops& ops = cpu_ops());

  const MlpShape& shape() const { return shape_; }
  const Ops& ops() const { return ops_; }
  // Registration order: fc<k>.weight, bn<k>.weight, bn<k>.bias per hidden layer k = 1..,
  // then out.weight, out.bias. Gradients are the model's own storage (see set_grad).
  size_t num_parameters() const { return names_.size(); }
  const std::string& name(size_t i) const { return names_[i]; }
  std::span<float> value(size_t i) { return values_[i]; }
  std::span<float> grad(size_t i) { return grads_[i]; }
  bool decays(size_t i) const { return decays_[i]; }  // weight decay: Linear weights only
  std::vector<procgroup::ddp::Parameter> parameters();
  // Backward accumulates gradient i into g from now on (e.g. a Reducer's bucket view).
  void set_grad(size_t i, std::span<float> g);
  // Running means and variances, for checkpoints and broadcasts.
  std::vector<procgroup::ddp::NamedTensor> buffers();

  void train(bool on);
  // n rows of inputs floats (on the device); the logits (n x classes, on the device) stay
  // valid until the next forward.
  std::span<const float> forward(const float* x, int n);
  // For the last forward: gradients accumulate, ready(i) is called as each one completes.
  void backward(std::span<const float> dlogits, const std::function<void(size_t)>& ready);

 private:
  struct Hidden {
    int in = 0, out = 0;
    std::unique_ptr<BatchNorm> bn;
    DeviceArray z, a;  // Linear output (BatchNorm input), ReLU output
  };

  const Ops& ops_;
  MlpShape shape_;
  std::vector<Hidden> layers_;
  std::vector<std::string> names_;
  std::vector<std::span<float>> values_, grads_;
  std::vector<bool> decays_;
  std::vector<DeviceArray> storage_;  // Linear values and every gradient
  const float* input_ = nullptr;
  int n_ = 0;
  DeviceArray logits_, da_, dz_;
};

}  // namespace fashion_mnist
