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

Mlp::Mlp(MlpShape shape, uint64_t seed, const BatchNormFactory& make_bn, const Ops& ops)
    : ops_(ops), shape_(std::move(shape)) {
  if (shape_.inputs <= 0 || shape_.classes <= 0) throw std::invalid_argument("bad MLP shape");
  // BatchNorm values live in the BatchNorm, the rest in storage_ (whose elements keep their
  // memory when it grows, so the spans stay valid). Gradients start at zero.
  auto add = [&](std::string name, std::span<float> value, bool decays) {
    names_.push_back(std::move(name));
    values_.push_back(value);
    storage_.emplace_back(ops_, value.size());
    grads_.push_back(storage_.back().span());
    decays_.push_back(decays);
  };
  // Drawn on the host, so every device starts from the same bits.
  auto add_owned = [&](std::string name, size_t size, int fan_in, bool decays) {
    std::vector<float> init(size);
    fill_uniform(init, 1.0f / std::sqrt(static_cast<float>(fan_in)), seed, names_.size());
    storage_.emplace_back(ops_, size);
    ops_.to_device(storage_.back().data(), init.data(), size * sizeof(float));
    add(std::move(name), storage_.back().span(), decays);
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
    p.push_back(procgroup::ddp::Parameter::of(names_[i], values_[i], grads_[i], ops_.device()));
  }
  return p;
}

void Mlp::set_grad(size_t i, std::span<float> g) {
  if (g.size() != values_.at(i).size()) throw std::invalid_argument("gradient size differs");
  grads_[i] = g;
}

std::vector<procgroup::ddp::NamedTensor> Mlp::buffers() {
  using procgroup::ddp::TensorRef;
  std::vector<procgroup::ddp::NamedTensor> b;
  for (size_t k = 0; k < layers_.size(); ++k) {
    const std::string id = "bn" + std::to_string(k + 1);
    BatchNorm& bn = *layers_[k].bn;
    b.push_back({id + ".running_mean", TensorRef::of(bn.running_mean(), ops_.device())});
    b.push_back({id + ".running_var", TensorRef::of(bn.running_var(), ops_.device())});
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
    const size_t size = static_cast<size_t>(n) * h.out;
    h.z.reserve(ops_, size);
    h.a.reserve(ops_, size);
    ops_.linear_forward(in, n, h.in, values_[3 * k].data(), nullptr, h.out, h.z.data());
    h.bn->forward(h.z.first(size), n, h.a.first(size));
    ops_.relu_forward(h.a.first(size));
    in = h.a.data();
  }
  const size_t out_w = 3 * layers_.size();
  const int last = layers_.empty() ? shape_.inputs : layers_.back().out;
  const size_t size = static_cast<size_t>(n) * shape_.classes;
  logits_.reserve(ops_, size);
  ops_.linear_forward(in, n, last, values_[out_w].data(), values_[out_w + 1].data(), shape_.classes,
                      logits_.data());
  return logits_.first(size);
}

void Mlp::backward(std::span<const float> dlogits, const std::function<void(size_t)>& ready) {
  const int n = n_;
  const size_t out_w = 3 * layers_.size();
  const int last = layers_.empty() ? shape_.inputs : layers_.back().out;
  const float* a_last = layers_.empty() ? input_ : layers_.back().a.data();
  // Each weight gradient is computed before the input gradient, so its bucket can start
  // reducing while the input gradient (and the layers below) are still being computed.
  ops_.linear_backward_weight(a_last, dlogits.data(), n, last, shape_.classes, grads_[out_w].data(),
                              grads_[out_w + 1].data());
  ready(out_w + 1);
  ready(out_w);
  if (layers_.empty()) return;
  size_t size = static_cast<size_t>(n) * last;
  da_.reserve(ops_, size);
  ops_.linear_backward_input(dlogits.data(), values_[out_w].data(), n, last, shape_.classes,
                             da_.data());
  for (size_t k = layers_.size(); k-- > 0;) {
    Hidden& h = layers_[k];
    size = static_cast<size_t>(n) * h.out;
    ops_.relu_backward(h.a.first(size), da_.first(size));
    dz_.reserve(ops_, size);
    h.bn->backward(h.z.first(size), da_.first(size), dz_.first(size), grads_[3 * k + 1],
                   grads_[3 * k + 2]);
    ready(3 * k + 2);
    ready(3 * k + 1);
    const float* in = k == 0 ? input_ : layers_[k - 1].a.data();
    ops_.linear_backward_weight(in, dz_.data(), n, h.in, h.out, grads_[3 * k].data(), nullptr);
    ready(3 * k);
    if (k == 0) break;  // no gradient for the inputs
    da_.reserve(ops_, static_cast<size_t>(n) * h.in);
    ops_.linear_backward_input(dz_.data(), values_[3 * k].data(), n, h.in, h.out, da_.data());
  }
}

}  // namespace fashion_mnist
