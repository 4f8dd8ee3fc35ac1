#include "sgd.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace fashion_mnist {

Sgd::Sgd(Mlp& model, SgdOptions options) : options_(options) {
  for (size_t i = 0; i < model.num_parameters(); ++i) {
    velocity_.emplace_back(model.ops(), model.value(i).size());  // zeroed
  }
}

void Sgd::step(Mlp& model, float lr) {
  for (size_t i = 0; i < model.num_parameters(); ++i) {
    const float decay = model.decays(i) ? options_.weight_decay : 0.0f;
    model.ops().sgd_update(model.value(i), model.grad(i), velocity_[i].span(), lr,
                           options_.momentum, decay, started_ == 0);
  }
  started_ = 1;
}

std::vector<procgroup::ddp::NamedTensor> Sgd::state(const Mlp& model) {
  std::vector<procgroup::ddp::NamedTensor> s;
  for (size_t i = 0; i < velocity_.size(); ++i) {
    s.push_back({"sgd." + model.name(i) + ".momentum",
                 procgroup::ddp::TensorRef::of(velocity_[i].span(), model.ops().device())});
  }
  s.push_back({"sgd.started", procgroup::ddp::TensorRef::of(std::span(&started_, 1))});
  return s;
}

Schedule parse_schedule(const std::string& name) {
  if (name == "constant") return Schedule::kConstant;
  if (name == "cosine") return Schedule::kCosine;
  throw std::invalid_argument("unknown learning-rate schedule '" + name + "' (constant or cosine)");
}

float learning_rate(float base, Schedule schedule, int64_t step, int64_t total) {
  if (schedule == Schedule::kConstant || total <= 0) return base;
  const double t = static_cast<double>(std::min(step, total)) / static_cast<double>(total);
  return static_cast<float>(base * 0.5 * (1.0 + std::cos(std::numbers::pi * t)));
}

}  // namespace fashion_mnist
