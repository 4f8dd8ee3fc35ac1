#include "layers.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

namespace fashion_mnist {

void linear_forward(const float* x, int n, int in, const float* w, const float* b, int out,
                    float* y) {
  if (n == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, x, in, w, in, 0.0f, y,
              out);
  if (b == nullptr) return;
  for (int i = 0; i < n; ++i) {
    float* row = y + static_cast<size_t>(i) * out;
    for (int o = 0; o < out; ++o) row[o] += b[o];
  }
}

void linear_backward_weight(const float* x, const float* dy, int n, int in, int out, float* dw,
                            float* db) {
  if (n == 0) return;
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, n, 1.0f, dy, out, x, in, 1.0f, dw,
              in);
  if (db == nullptr) return;
  for (int i = 0; i < n; ++i) {
    const float* row = dy + static_cast<size_t>(i) * out;
    for (int o = 0; o < out; ++o) db[o] += row[o];
  }
}

void linear_backward_input(const float* dy, const float* w, int n, int in, int out, float* dx) {
  if (n == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in, out, 1.0f, dy, out, w, in, 0.0f, dx,
              in);
}

void relu_forward(std::span<float> x) {
  for (float& v : x) v = v > 0.0f ? v : 0.0f;
}

void relu_backward(std::span<const float> y, std::span<float> dy) {
  for (size_t i = 0; i < dy.size(); ++i) {
    if (!(y[i] > 0.0f)) dy[i] = 0.0f;
  }
}

LossStats softmax_cross_entropy(const float* logits, const uint8_t* labels, int n, int classes,
                                float scale, float* dlogits) {
  LossStats s;
  for (int i = 0; i < n; ++i) {
    const float* z = logits + static_cast<size_t>(i) * classes;
    const int best = static_cast<int>(std::max_element(z, z + classes) - z);
    double sum = 0;
    for (int k = 0; k < classes; ++k) sum += std::exp(static_cast<double>(z[k] - z[best]));
    const double log_sum = std::log(sum) + z[best];
    s.loss_sum += log_sum - z[labels[i]];
    s.correct += best == labels[i];
    if (dlogits == nullptr) continue;
    float* d = dlogits + static_cast<size_t>(i) * classes;
    for (int k = 0; k < classes; ++k) {
      const double p = std::exp(z[k] - log_sum);
      d[k] = static_cast<float>(scale * (p - (k == labels[i] ? 1.0 : 0.0)));
    }
  }
  return s;
}

namespace {

constexpr double kEps = 1e-5;
constexpr double kMomentum = 0.1;

// Rows are samples, columns channels; statistics in double like ddp::SyncBatchNorm's.
class LocalBatchNorm final : public BatchNorm {
 public:
  explicit LocalBatchNorm(int channels)
      : c_(channels),
        weight_(channels, 1.0f),
        bias_(channels, 0.0f),
        running_mean_(channels, 0.0f),
        running_var_(channels, 1.0f),
        mean_(channels),
        invstd_(channels) {}

  void forward(std::span<const float> x, int n, std::span<float> y) override {
    n_ = n;
    if (training_) {
      std::vector<double> sum(c_, 0.0), m2(c_, 0.0);
      for (int i = 0; i < n; ++i) {
        for (int c = 0; c < c_; ++c) sum[c] += x[static_cast<size_t>(i) * c_ + c];
      }
      for (int c = 0; c < c_; ++c) mean_[c] = sum[c] / n;
      for (int i = 0; i < n; ++i) {
        for (int c = 0; c < c_; ++c) {
          const double d = x[static_cast<size_t>(i) * c_ + c] - mean_[c];
          m2[c] += d * d;
        }
      }
      for (int c = 0; c < c_; ++c) {
        invstd_[c] = 1.0 / std::sqrt(m2[c] / n + kEps);
        running_mean_[c] =
            static_cast<float>((1 - kMomentum) * running_mean_[c] + kMomentum * mean_[c]);
        const double unbiased = n > 1 ? m2[c] / (n - 1) : m2[c];
        running_var_[c] =
            static_cast<float>((1 - kMomentum) * running_var_[c] + kMomentum * unbiased);
      }
    } else {
      for (int c = 0; c < c_; ++c) {
        mean_[c] = running_mean_[c];
        invstd_[c] = 1.0 / std::sqrt(static_cast<double>(running_var_[c]) + kEps);
      }
    }
    std::vector<float> scale(c_), shift(c_);
    for (int c = 0; c < c_; ++c) {
      scale[c] = static_cast<float>(invstd_[c] * weight_[c]);
      shift[c] = static_cast<float>(bias_[c] - mean_[c] * invstd_[c] * weight_[c]);
    }
    for (int i = 0; i < n; ++i) {
      const size_t row = static_cast<size_t>(i) * c_;
      for (int c = 0; c < c_; ++c) y[row + c] = x[row + c] * scale[c] + shift[c];
    }
  }

  void backward(std::span<const float> x, std::span<const float> dy, std::span<float> dx,
                std::span<float> grad_weight, std::span<float> grad_bias) override {
    const int n = n_;
    std::vector<double> sum_dy(c_, 0.0), sum_dy_xmu(c_, 0.0);
    for (int i = 0; i < n; ++i) {
      const size_t row = static_cast<size_t>(i) * c_;
      for (int c = 0; c < c_; ++c) {
        sum_dy[c] += dy[row + c];
        sum_dy_xmu[c] += dy[row + c] * (x[row + c] - mean_[c]);
      }
    }
    std::vector<double> a(c_), b(c_);  // dx = (dy - mean_dy - xmu * a) * b
    for (int c = 0; c < c_; ++c) {
      grad_weight[c] += static_cast<float>(sum_dy_xmu[c] * invstd_[c]);
      grad_bias[c] += static_cast<float>(sum_dy[c]);
      a[c] = training_ ? invstd_[c] * invstd_[c] * sum_dy_xmu[c] / n : 0.0;
      b[c] = invstd_[c] * weight_[c];
      sum_dy[c] = training_ ? sum_dy[c] / n : 0.0;
    }
    for (int i = 0; i < n; ++i) {
      const size_t row = static_cast<size_t>(i) * c_;
      for (int c = 0; c < c_; ++c) {
        const double xmu = x[row + c] - mean_[c];
        dx[row + c] = static_cast<float>((dy[row + c] - sum_dy[c] - xmu * a[c]) * b[c]);
      }
    }
  }

  void train(bool on) override { training_ = on; }
  std::span<float> weight() override { return weight_; }
  std::span<float> bias() override { return bias_; }
  std::span<float> running_mean() override { return running_mean_; }
  std::span<float> running_var() override { return running_var_; }

 private:
  int c_;
  bool training_ = true;
  int n_ = 0;
  std::vector<float> weight_, bias_, running_mean_, running_var_;
  std::vector<double> mean_, invstd_;
};

}  // namespace

std::unique_ptr<BatchNorm> make_local_batch_norm(int channels) {
  return std::make_unique<LocalBatchNorm>(channels);
}

}  // namespace fashion_mnist
