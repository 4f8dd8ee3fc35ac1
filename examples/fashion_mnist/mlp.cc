#include "mlp.h"

#include <cmath>
#include <stdexcept>

namespace fashion_mnist {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Uniform in [-bound, bound), from 24 random bits: identical on every platform.
void fill_uniform(std::span<float> v, float bound, uint64_t seed, uint64_t stream) {
  uint64_t state = seed * 0x2545f4914f6cdd1dULL ^ (stream + 1) * 0x9e3779b97f4a7c15ULL;
  for (float& x : v) {
    const float u = static_cast<float>(splitmix64(state) >> 40) * 0x1.0p-24f;
    x = (2.0f * u - 1.0f) * bound;
  }
}

}  // namespace

Mlp::Mlp(MlpShape shape, uint64_t seed, const BatchNormFactory& make_bn)
    : shape_(std::move(shape)) {
  if (shape_.inputs <= 0 || shape_.classes <= 0) throw std::invalid_argument("bad MLP shape");
  // BatchNorm values live in the BatchNorm, the rest in storage_ (whose inner vectors keep
  // their buffers when it grows, so the spans stay valid).
  auto add = [&](std::string name, std::span<float> value, bool decays) {
    names_.push_back(std::move(name));
    values_.push_back(value);
    storage_.emplace_back(value.size(), 0.0f);
    grads_.push_back(storage_.back());
    decays_.push_back(decays);
  };
  auto add_owned = [&](std::string name, size_t size, int fan_in, bool decays) {
    storage_.emplace_back(size);
    std::span<float> v = storage_.back();
    fill_uniform(v, 1.0f / std::sqrt(static_cast<float>(fan_in)), seed, names_.size());
    add(std::move(name), v, decays);
  };
  int in = shape_.inputs;
  for (size_t k = 0; k < shape_.hidden.size(); ++k) {
    const int out = shape_.hidden[k];
    if (out <= 0) throw std::invalid_argument("bad hidden layer size");
    Hidden h;
    h.in = in;
    h.out = out;
    h.bn = make_bn(out);
    const std::string id = std::to_string(k + 1);
    add_owned("fc" + id + ".weight", static_cast<size_t>(out) * in, in, true);
    add("bn" + id + ".weight", h.bn->weight(), false);
    add("bn" + id + ".bias", h.bn->bias(), false);
    layers_.push_back(std::move(h));
    in = out;
  }
  add_owned("out.weight", static_cast<size_t>(shape_.classes) * in, in, true);
  add_owned("out.bias", shape_.classes, in, false);
}

std::vector<procgroup::ddp::Parameter> Mlp::parameters() {
  std::vector<procgroup::ddp::Parameter> p;
  for (size_t i = 0; i < names_.size(); ++i) {
    p.push_back(procgroup::ddp::Parameter::of(names_[i], values_[i], grads_[i]));
  }
  return p;
}

void Mlp::set_grad(size_t i, std::span<float> g) {
  if (g.size() != values_.at(i).size()) throw std::invalid_argument("gradient size differs");
  grads_[i] = g;
}

std::vector<procgroup::ddp::NamedTensor> Mlp::buffers() {
  std::vector<procgroup::ddp::NamedTensor> b;
  for (size_t k = 0; k < layers_.size(); ++k) {
    const std::string id = "bn" + std::to_string(k + 1);
    b.push_back(
        {id + ".running_mean", procgroup::ddp::TensorRef::of(layers_[k].bn->running_mean())});
    b.push_back({id + ".running_var", procgroup::ddp::TensorRef::of(layers_[k].bn->running_var())});
  }
  return b;
}

void Mlp::train(bool on) {
  for (Hidden& h : layers_) h.bn->train(on);
}

std::span<const float> Mlp::forward(const float* x, int n) {
  input_ = x;
  n_ = n;
  const float* in = x;
  for (size_t k = 0; k < layers_.size(); ++k) {
    Hidden& h = layers_[k];
    h.z.resize(static_cast<size_t>(n) * h.out);
    h.a.resize(h.z.size());
    linear_forward(in, n, h.in, values_[3 * k].data(), nullptr, h.out, h.z.data());
    h.bn->forward(h.z, n, h.a);
    relu_forward(h.a);
    in = h.a.data();
  }
  const size_t out_w = 3 * layers_.size();
  const int last = layers_.empty() ? shape_.inputs : layers_.back().out;
  logits_.resize(static_cast<size_t>(n) * shape_.classes);
  linear_forward(in, n, last, values_[out_w].data(), values_[out_w + 1].data(), shape_.classes,
                 logits_.data());
  return logits_;
}

void Mlp::backward(std::span<const float> dlogits, const std::function<void(size_t)>& ready) {
  const int n = n_;
  const size_t out_w = 3 * layers_.size();
  const int last = layers_.empty() ? shape_.inputs : layers_.back().out;
  const float* a_last = layers_.empty() ? input_ : layers_.back().a.data();
  // Each weight gradient is computed before the input gradient, so its bucket can start
  // reducing while the input gradient (and the layers below) are still being computed.
  linear_backward_weight(a_last, dlogits.data(), n, last, shape_.classes, grads_[out_w].data(),
                         grads_[out_w + 1].data());
  ready(out_w + 1);
  ready(out_w);
  if (layers_.empty()) return;
  da_.resize(static_cast<size_t>(n) * last);
  linear_backward_input(dlogits.data(), values_[out_w].data(), n, last, shape_.classes, da_.data());
  for (size_t k = layers_.size(); k-- > 0;) {
    Hidden& h = layers_[k];
    relu_backward(h.a, da_);
    dz_.resize(da_.size());
    h.bn->backward(h.z, da_, dz_, grads_[3 * k + 1], grads_[3 * k + 2]);
    ready(3 * k + 2);
    ready(3 * k + 1);
    const float* in = k == 0 ? input_ : layers_[k - 1].a.data();
    linear_backward_weight(in, dz_.data(), n, h.in, h.out, grads_[3 * k].data(), nullptr);
    ready(3 * k);
    if (k == 0) break;  // no gradient for the inputs
    da_.resize(static_cast<size_t>(n) * h.in);
    linear_backward_input(dz_.data(), values_[3 * k].data(), n, h.in, h.out, da_.data());
  }
}

}  // namespace fashion_mnist
