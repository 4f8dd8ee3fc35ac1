#include "mlp.h"

#include <algorithm>
#include <cmath>

namespace procgroup::ddp::testing {
namespace {

// Deterministic values in [-1, 1) from (seed, stream, index).
float value(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + stream * 0xbf58476d1ce4e5b9ull + index + 1;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<float>(static_cast<double>(z >> 11) / 4503599627370496.0 - 1.0);
}

}  // namespace

Mlp Mlp::make(MlpShape shape, uint64_t seed) {
  Mlp m{shape, {}};
  const size_t sizes[kMlpParams] = {size_t(shape.hidden * shape.in), size_t(shape.hidden),
                                    size_t(shape.out * shape.hidden), size_t(shape.out)};
  for (size_t k = 0; k < kMlpParams; ++k) {
    m.params[k].resize(sizes[k]);
    for (size_t i = 0; i < sizes[k]; ++i) m.params[k][i] = 0.5f * value(seed, k, i);
  }
  return m;
}

std::vector<float> Mlp::flat() const {
  std::vector<float> out;
  for (const auto& p : params) out.insert(out.end(), p.begin(), p.end());
  return out;
}

Batch Batch::slice(int first_row, int count) const {
  Batch b{in, out, count, {}, {}};
  b.x.assign(x.begin() + first_row * in, x.begin() + (first_row + count) * in);
  b.t.assign(t.begin() + first_row * out, t.begin() + (first_row + count) * out);
  return b;
}

Batch make_batch(const MlpShape& shape, int rows, uint64_t seed, uint64_t step) {
  Batch b{shape.in, shape.out, rows, std::vector<float>(rows * shape.in),
          std::vector<float>(rows * shape.out)};
  for (size_t i = 0; i < b.x.size(); ++i) b.x[i] = value(seed + 1000, step, i);
  // Targets: a fixed nonlinear function of x, so training makes progress.
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < shape.out; ++o) {
      float s = 0;
      for (int i = 0; i < shape.in; ++i) s += b.x[r * shape.in + i] * value(99, o, i);
      b.t[r * shape.out + o] = std::sin(s);
    }
  }
  return b;
}

void backward(const Mlp& model, const Batch& batch, float scale, const Grads& grads,
              const std::function<void(size_t)>& ready) {
  const int I = model.shape.in, H = model.shape.hidden, O = model.shape.out, R = batch.rows;
  const auto &w1 = model.params[0], &b1 = model.params[1], &w2 = model.params[2],
             &b2 = model.params[3];
  std::vector<float> h(R * H), dy(R * O);
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < H; ++j) {
      float z = b1[j];
      for (int i = 0; i < I; ++i) z += w1[j * I + i] * batch.x[r * I + i];
      h[r * H + j] = std::tanh(z);
    }
    for (int o = 0; o < O; ++o) {
      float y = b2[o];
      for (int j = 0; j < H; ++j) y += w2[o * H + j] * h[r * H + j];
      dy[r * O + o] = y - batch.t[r * O + o];
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int o = 0; o < O; ++o) grads[3][o] += scale * dy[r * O + o];
  }
  ready(3);
  for (int r = 0; r < R; ++r) {
    for (int o = 0; o < O; ++o) {
      for (int j = 0; j < H; ++j) grads[2][o * H + j] += scale * dy[r * O + o] * h[r * H + j];
    }
  }
  ready(2);
  std::vector<float> dz(R * H);
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < H; ++j) {
      float dh = 0;
      for (int o = 0; o < O; ++o) dh += w2[o * H + j] * dy[r * O + o];
      dz[r * H + j] = dh * (1 - h[r * H + j] * h[r * H + j]);
      grads[1][j] += scale * dz[r * H + j];
    }
  }
  ready(1);
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < H; ++j) {
      for (int i = 0; i < I; ++i) grads[0][j * I + i] += scale * dz[r * H + j] * batch.x[r * I + i];
    }
  }
  ready(0);
}

Sgd::Sgd(const Mlp& model, float lr, float momentum) : lr_(lr), momentum_(momentum) {
  for (size_t k = 0; k < kMlpParams; ++k) velocity_[k].assign(model.params[k].size(), 0.0f);
}

void Sgd::step(Mlp& model, const Grads& grads) {
  for (size_t k = 0; k < kMlpParams; ++k) {
    for (size_t i = 0; i < model.params[k].size(); ++i) {
      velocity_[k][i] = momentum_ * velocity_[k][i] + grads[k][i];
      model.params[k][i] -= lr_ * velocity_[k][i];
    }
  }
}

std::vector<Parameter> parameters(Mlp& model, const Grads& grads) {
  static const char* const kNames[kMlpParams] = {"fc1.weight", "fc1.bias", "fc2.weight",
                                                 "fc2.bias"};
  std::vector<Parameter> out;
  for (size_t k = 0; k < kMlpParams; ++k) {
    out.push_back(Parameter::of(kNames[k], std::span(model.params[k]), grads[k]));
  }
  return out;
}

GradStore::GradStore(const Mlp& model) {
  for (size_t k = 0; k < kMlpParams; ++k) data[k].assign(model.params[k].size(), 0.0f);
}

Grads GradStore::spans() {
  Grads g;
  for (size_t k = 0; k < kMlpParams; ++k) g[k] = std::span(data[k]);
  return g;
}

void GradStore::zero() {
  for (auto& d : data) std::fill(d.begin(), d.end(), 0.0f);
}

}  // namespace procgroup::ddp::testing
