// sgd.h — SGD with momentum and L2 weight decay, as PyTorch's torch.optim.SGD updates:
//   g = grad + weight_decay * w   (for parameters that decay)
//   v = momentum * v + g          (v = g on the first step)
//   w = w - lr * v
// on the model's device (its Ops), plus the learning-rate schedule (constant, or cosine from lr to
// 0 over the run).
//
//   Sgd sgd(model, {.momentum = 0.9f, .weight_decay = 5e-4f});
//   sgd.step(model, learning_rate(config, step, total_steps));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mlp.h"

namespace fashion_mnist {

struct SgdOptions {
  float momentum = 0.9f;
  float weight_decay = 5e-4f;
};

class Sgd {
 public:
  Sgd(Mlp& model, SgdOptions options);
  void step(Mlp& model, float lr);
  // Momentum buffers ("sgd.<parameter>.momentum", on the model's device) and whether they
  // hold a value yet (host).
  std::vector<procgroup::ddp::NamedTensor> state(const Mlp& model);

 private:
  SgdOptions options_;
  std::vector<DeviceArray> velocity_;
  int64_t started_ = 0;  // 1 once the buffers hold a value (a tensor, for checkpoints)
};

enum class Schedule { kConstant, kCosine };
Schedule parse_schedule(const std::string& name);  // std::invalid_argument when unknown

// lr at optimizer step `step` (0-based) of `total`: constant, or
// base * (1 + cos(pi * step / total)) / 2.
float learning_rate(float base, Schedule schedule, int64_t step, int64_t total);

}  // namespace fashion_mnist
