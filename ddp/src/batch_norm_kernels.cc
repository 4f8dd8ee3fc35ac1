// SyncBatchNorm's loops on the CPU, and the dispatch to their CUDA twins (cuda/batch_norm.cu).
#include "batch_norm_kernels.h"

#include <cmath>

#include "procgroup/ddp/error.h"
#if defined(PROCGROUP_HAVE_CUDA)
#include "cuda/cuda_ops.h"
#endif

namespace procgroup::ddp::detail {
namespace {

size_t at(const BnShape& s, int64_t i, int64_t c, int64_t k) {
  return static_cast<size_t>((i * s.channels + c) * s.spatial + k);
}

}  // namespace

void bn_local_stats(const Exec& exec, const BnShape& s, const float* x, double eps, double* row) {
  const int64_t C = s.channels;
  if (!exec.on_cpu()) {
#if defined(PROCGROUP_HAVE_CUDA)
    return cuda::bn_local_stats(exec.device.index, exec.stream, s.n, C, s.spatial, x, eps, row);
#else
    no_cuda();
#endif
  }
  const double count = static_cast<double>(s.n * s.spatial);
  row[0] = count;
  for (int64_t c = 0; c < C; ++c) {
    row[1 + c] = row[1 + C + c] = 0.0;
    if (count <= 0) continue;
    double sum = 0, m2 = 0;
    for (int64_t i = 0; i < s.n; ++i) {
      for (int64_t k = 0; k < s.spatial; ++k) sum += x[at(s, i, c, k)];
    }
    const double mean = sum / count;
    for (int64_t i = 0; i < s.n; ++i) {
      for (int64_t k = 0; k < s.spatial; ++k) {
        const double d = x[at(s, i, c, k)] - mean;
        m2 += d * d;
      }
    }
    row[1 + c] = mean;
    row[1 + C + c] = 1.0 / std::sqrt(m2 / count + eps);
  }
}

void bn_running_to_stats(const Exec& exec, int64_t C, const float* rm, const float* rv,
                         double eps, double* stats) {
  if (!exec.on_cpu()) {
#if defined(PROCGROUP_HAVE_CUDA)
    return cuda::bn_running_to_stats(exec.device.index, exec.stream, C, rm, rv, eps, stats);
#else
    no_cuda();
#endif
  }
  for (int64_t c = 0; c < C; ++c) {
    stats[c] = rm[c];
    stats[C + c] = 1.0 / std::sqrt(static_cast<double>(rv[c]) + eps);
  }
}

void bn_update_running(const Exec& exec, int64_t C, float* rm, float* rv, const double* stats,
                       double m) {
  if (!exec.on_cpu()) {
#if defined(PROCGROUP_HAVE_CUDA)
    return cuda::bn_update_running(exec.device.index, exec.stream, C, rm, rv, stats, m);
#else
    no_cuda();
#endif
  }
  for (int64_t c = 0; c < C; ++c) {
    rm[c] = static_cast<float>((1 - m) * rm[c] + m * stats[c]);
    rv[c] = static_cast<float>((1 - m) * rv[c] + m * stats[2 * C + c]);
  }
}

void bn_normalize(const Exec& exec, const BnShape& s, const float* x, float* y,
                  const double* stats, const float* weight, const float* bias) {
  const int64_t C = s.channels;
  if (!exec.on_cpu()) {
#if defined(PROCGROUP_HAVE_CUDA)
    return cuda::bn_normalize(exec.device.index, exec.stream, s.n, C, s.spatial, x, y, stats,
                              weight, bias);
#else
    no_cuda();
#endif
  }
  for (int64_t c = 0; c < C; ++c) {
    const double scale = stats[C + c] * (weight ? weight[c] : 1.0f);
    const double shift = bias ? bias[c] : 0.0f;
    for (int64_t i = 0; i < s.n; ++i) {
      for (int64_t k = 0; k < s.spatial; ++k) {
        const size_t j = at(s, i, c, k);
        y[j] = static_cast<float>((x[j] - stats[c]) * scale + shift);
      }
    }
  }
}

void bn_backward_reduce(const Exec& exec, const BnShape& s, const float* x, const float* dy,
                        const double* stats, double* sums, float* gw, float* gb) {
  const int64_t C = s.channels;
  if (!exec.on_cpu()) {
#if defined(PROCGROUP_HAVE_CUDA)
    return cuda::bn_backward_reduce(exec.device.index, exec.stream, s.n, C, s.spatial, x, dy,
                                    stats, sums, gw, gb);
#else
    no_cuda();
#endif
  }
  for (int64_t c = 0; c < C; ++c) {
    double sum_dy = 0, sum_dy_xmu = 0;
    for (int64_t i = 0; i < s.n; ++i) {
      for (int64_t k = 0; k < s.spatial; ++k) {
        const size_t j = at(s, i, c, k);
        sum_dy += dy[j];
        sum_dy_xmu += dy[j] * (x[j] - stats[c]);
      }
    }
    sums[c] = sum_dy;
    sums[C + c] = sum_dy_xmu;
    if (gw) gw[c] = static_cast<float>(sum_dy_xmu * stats[C + c]);
    if (gb) gb[c] = static_cast<float>(sum_dy);
  }
}

void bn_backward_input(const Exec& exec, const BnShape& s, const float* x, const float* dy,
                       float* dx, const double* stats, const float* weight, const double* sums,
                       double total) {
  const int64_t C = s.channels;
  if (!exec.on_cpu()) {
#if defined(PROCGROUP_HAVE_CUDA)
    return cuda::bn_backward_input(exec.device.index, exec.stream, s.n, C, s.spatial, x, dy, dx,
                                   stats, weight, sums, total);
#else
    no_cuda();
#endif
  }
  for (int64_t c = 0; c < C; ++c) {
    const double w = weight ? weight[c] : 1.0;
    const double mean = stats[c], invstd = stats[C + c];
    // With batch statistics the mean and variance depend on x too.
    const double mean_dy = total > 0 ? sums[c] / total : 0.0;
    const double mean_dy_xmu = total > 0 ? sums[C + c] / total : 0.0;
    for (int64_t i = 0; i < s.n; ++i) {
      for (int64_t k = 0; k < s.spatial; ++k) {
        const size_t j = at(s, i, c, k);
        const double xmu = x[j] - mean;
        dx[j] = static_cast<float>((dy[j] - mean_dy - xmu * invstd * invstd * mean_dy_xmu) *
                                   invstd * w);
      }
    }
  }
}

}  // namespace procgroup::ddp::detail
