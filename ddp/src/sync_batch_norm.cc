#include "procgroup/ddp/sync_batch_norm.h"

#include <cmath>
#include <string>

#include "procgroup/ddp/error.h"

namespace procgroup::ddp {

SyncBatchNorm::SyncBatchNorm(const Group& group, int64_t channels, SyncBatchNormOptions options)
    : group_(&group),
      channels_(channels),
      options_(options),
      weight_(channels, 1.0f),
      bias_(channels, 0.0f),
      running_mean_(channels, 0.0f),
      running_var_(channels, 1.0f) {
  if (channels <= 0) {
    throw Error(PG_ERR_INVALID_ARGUMENT, "SyncBatchNorm: channels must be positive");
  }
}

void SyncBatchNorm::check_sizes(size_t x, size_t other, const char* what) const {
  if (x != other) {
    throw Error(PG_ERR_INVALID_ARGUMENT, std::string("SyncBatchNorm: ") + what + " has " +
                                             std::to_string(other) + " elements, expected " +
                                             std::to_string(x));
  }
}

void SyncBatchNorm::forward(std::span<const float> x, int64_t n, int64_t spatial,
                            std::span<float> y) {
  if (n < 0 || spatial <= 0) {
    throw Error(PG_ERR_INVALID_ARGUMENT, "SyncBatchNorm: need n >= 0 and spatial > 0");
  }
  const int64_t C = channels_, S = spatial;
  check_sizes(static_cast<size_t>(n * C * S), x.size(), "x");
  check_sizes(x.size(), y.size(), "y");
  n_ = n;
  spatial_ = S;
  mean_.assign(C, 0.0);
  invstd_.assign(C, 0.0);
  saved_batch_stats_ = uses_batch_stats();

  if (saved_batch_stats_) {
    // Local statistics in double (two passes), then [count, mean(C), invstd(C)] per rank.
    const double count = static_cast<double>(n * S);
    const int size = group_->size();
    std::vector<double> mine(1 + 2 * C, 0.0), all(size * (1 + 2 * C));
    mine[0] = count;
    for (int64_t c = 0; c < C && count > 0; ++c) {
      double sum = 0, m2 = 0;
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t s = 0; s < S; ++s) sum += x[(i * C + c) * S + s];
      }
      const double mean = sum / count;
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t s = 0; s < S; ++s) {
          const double d = x[(i * C + c) * S + s] - mean;
          m2 += d * d;
        }
      }
      mine[1 + c] = mean;
      mine[1 + C + c] = 1.0 / std::sqrt(m2 / count + options_.eps);
    }
    group_->allgather(std::span<const double>(mine), std::span(all)).wait();

    // Chan et al.: combine (count, mean, M2) pairwise; empty ranks contribute nothing.
    std::vector<double> m2(C, 0.0);
    double total = 0;
    for (int r = 0; r < size; ++r) {
      const double* row = &all[r * (1 + 2 * C)];
      const double nr = row[0];
      if (nr <= 0) continue;
      for (int64_t c = 0; c < C; ++c) {
        const double var_r = 1.0 / (row[1 + C + c] * row[1 + C + c]) - options_.eps;
        const double delta = row[1 + c] - mean_[c];
        mean_[c] += delta * nr / (total + nr);
        m2[c] += var_r * nr + delta * delta * total * nr / (total + nr);
      }
      total += nr;
    }
    if (total <= 1) {
      throw Error(PG_ERR_INVALID_ARGUMENT,
                  "SyncBatchNorm: expected more than 1 value per channel across all ranks "
                  "in training, got " +
                      std::to_string(static_cast<int64_t>(total)));
    }
    total_count_ = total;
    for (int64_t c = 0; c < C; ++c) {
      const double var = m2[c] / total;
      invstd_[c] = 1.0 / std::sqrt(var + options_.eps);
      if (training_ && options_.track_running_stats) {
        const double m = options_.momentum;
        running_mean_[c] = static_cast<float>((1 - m) * running_mean_[c] + m * mean_[c]);
        running_var_[c] = static_cast<float>((1 - m) * running_var_[c] + m * m2[c] / (total - 1));
      }
    }
    if (training_ && options_.track_running_stats) ++num_batches_tracked_;
  } else {
    for (int64_t c = 0; c < C; ++c) {
      mean_[c] = running_mean_[c];
      invstd_[c] = 1.0 / std::sqrt(static_cast<double>(running_var_[c]) + options_.eps);
    }
  }

  for (int64_t c = 0; c < C; ++c) {
    const double scale = invstd_[c] * (options_.affine ? weight_[c] : 1.0f);
    const double shift = options_.affine ? bias_[c] : 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t s = 0; s < S; ++s) {
        const size_t k = (i * C + c) * S + s;
        y[k] = static_cast<float>((x[k] - mean_[c]) * scale + shift);
      }
    }
  }
}

void SyncBatchNorm::backward(std::span<const float> x, std::span<const float> dy,
                             std::span<float> dx, std::span<float> grad_weight,
                             std::span<float> grad_bias) {
  const int64_t C = channels_, S = spatial_, n = n_;
  const size_t elems = static_cast<size_t>(n * C * S);
  check_sizes(elems, x.size(), "x");
  check_sizes(elems, dy.size(), "dy");
  check_sizes(elems, dx.size(), "dx");
  if (!grad_weight.empty()) check_sizes(C, grad_weight.size(), "grad_weight");
  if (!grad_bias.empty()) check_sizes(C, grad_bias.size(), "grad_bias");

  // [sum_dy(C), sum_dy_xmu(C)]: local first (they are also the local weight/bias grads).
  std::vector<double> sums(2 * C, 0.0);
  for (int64_t c = 0; c < C; ++c) {
    double sum_dy = 0, sum_dy_xmu = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t s = 0; s < S; ++s) {
        const size_t k = (i * C + c) * S + s;
        sum_dy += dy[k];
        sum_dy_xmu += dy[k] * (x[k] - mean_[c]);
      }
    }
    sums[c] = sum_dy;
    sums[C + c] = sum_dy_xmu;
    if (!grad_weight.empty()) grad_weight[c] = static_cast<float>(sum_dy_xmu * invstd_[c]);
    if (!grad_bias.empty()) grad_bias[c] = static_cast<float>(sum_dy);
  }
  if (saved_batch_stats_) group_->allreduce(std::span(sums)).wait();

  for (int64_t c = 0; c < C; ++c) {
    const double w = options_.affine ? weight_[c] : 1.0;
    const double invstd = invstd_[c];
    // With batch statistics the mean and variance depend on x too.
    const double mean_dy = saved_batch_stats_ ? sums[c] / total_count_ : 0.0;
    const double mean_dy_xmu = saved_batch_stats_ ? sums[C + c] / total_count_ : 0.0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t s = 0; s < S; ++s) {
        const size_t k = (i * C + c) * S + s;
        const double xmu = x[k] - mean_[c];
        dx[k] = static_cast<float>((dy[k] - mean_dy - xmu * invstd * invstd * mean_dy_xmu) *
                                   invstd * w);
      }
    }
  }
}

}  // namespace procgroup::ddp
