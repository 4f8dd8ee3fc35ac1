// Plain batch normalisation of a whole batch in double: the reference every SyncBatchNorm
// test compares against, with the inputs those tests use (n x kC x kS floats).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace procgroup::ddp::testing {

inline constexpr int kC = 3, kS = 4;  // channels, spatial (2 x 2)
inline constexpr double kEps = 1e-5, kMomentum = 0.1;

inline float input(uint64_t iteration, size_t k) {
  const int c = static_cast<int>((k / kS) % kC);
  const double noise = std::sin(static_cast<double>(k) * 1.7 + iteration * 0.3);
  return static_cast<float>(2.0 * c - 1 + (1.0 + c) * noise);
}
inline float grad_out(size_t k) { return static_cast<float>(std::cos(static_cast<double>(k) * 0.9)); }
inline float weight(int c) { return 1.0f + 0.5f * c; }
inline float bias(int c) { return 0.1f * c - 0.2f; }

// Plain batch norm over the whole batch, in double.
struct Reference {
  std::vector<double> y, dx, dweight, dbias, running_mean, running_var;
  Reference(const std::vector<float>& x, const std::vector<float>& dy, int n,
            std::vector<double> rm, std::vector<double> rv) {
    y.resize(x.size());
    dx.resize(x.size());
    const double count = static_cast<double>(n) * kS;
    for (int c = 0; c < kC; ++c) {
      auto at = [&](int i, int s) { return (static_cast<size_t>(i) * kC + c) * kS + s; };
      double mean = 0, var = 0;
      for (int i = 0; i < n; ++i)
        for (int s = 0; s < kS; ++s) mean += x[at(i, s)];
      mean /= count;
      for (int i = 0; i < n; ++i)
        for (int s = 0; s < kS; ++s) var += std::pow(x[at(i, s)] - mean, 2);
      const double invstd = 1 / std::sqrt(var / count + kEps);
      double sum_dxhat = 0, sum_dxhat_xhat = 0, dw = 0, db = 0;
      for (int i = 0; i < n; ++i) {
        for (int s = 0; s < kS; ++s) {
          const double xhat = (x[at(i, s)] - mean) * invstd;
          y[at(i, s)] = xhat * weight(c) + bias(c);
          const double dxhat = dy[at(i, s)] * weight(c);
          sum_dxhat += dxhat;
          sum_dxhat_xhat += dxhat * xhat;
          dw += dy[at(i, s)] * xhat;
          db += dy[at(i, s)];
        }
      }
      for (int i = 0; i < n; ++i) {
        for (int s = 0; s < kS; ++s) {
          const double xhat = (x[at(i, s)] - mean) * invstd;
          const double dxhat = dy[at(i, s)] * weight(c);
          dx[at(i, s)] = invstd / count * (count * dxhat - sum_dxhat - xhat * sum_dxhat_xhat);
        }
      }
      dweight.push_back(dw);
      dbias.push_back(db);
      running_mean.push_back((1 - kMomentum) * rm[c] + kMomentum * mean);
      running_var.push_back((1 - kMomentum) * rv[c] + kMomentum * var / (count - 1));
    }
  }
};

}  // namespace procgroup::ddp::testing
