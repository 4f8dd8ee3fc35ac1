// The CUDA Ops' kernels (see cuda_kernels.h). Built with --fmad=false, so products and sums
// round as layers.cc's do on the CPU instead of fusing into FMAs.
#include "cuda_kernels.h"

namespace fashion_mnist::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 ? (b == 0 ? 1 : b) : 65535);
}

// Grid-stride loops (for i = start(); i < n; i += stride()): any n with a bounded grid.
__device__ size_t start() { return blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; }
__device__ size_t stride() { return static_cast<size_t>(blockDim.x) * gridDim.x; }

__global__ void fill_kernel(float* x, size_t n, float value) {
  for (size_t i = start(); i < n; i += stride()) x[i] = value;
}

__global__ void add_kernel(float* dst, const float* src, size_t n) {
  for (size_t i = start(); i < n; i += stride()) dst[i] += src[i];
}

__global__ void add_bias_kernel(float* y, const float* b, size_t n, int out) {
  for (size_t i = start(); i < n; i += stride()) y[i] += b[i % out];
}

// One thread per column, rows in order: the CPU's summation order.
__global__ void column_sums_kernel(const float* dy, int n, int out, float* db) {
  const int o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= out) return;
  float acc = db[o];
  for (int i = 0; i < n; ++i) acc += dy[static_cast<size_t>(i) * out + o];
  db[o] = acc;
}

__global__ void relu_forward_kernel(float* x, size_t n) {
  for (size_t i = start(); i < n; i += stride()) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void relu_backward_kernel(const float* y, float* dy, size_t n) {
  for (size_t i = start(); i < n; i += stride()) {
    if (!(y[i] > 0.0f)) dy[i] = 0.0f;
  }
}

__global__ void softmax_cross_entropy_kernel(const float* logits, const uint8_t* labels, int n,
                                             int classes, float scale, float* dlogits, double* loss,
                                             int32_t* correct) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float* z = logits + static_cast<size_t>(i) * classes;
  int best = 0;
  for (int k = 1; k < classes; ++k) {
    if (z[k] > z[best]) best = k;
  }
  double sum = 0;
  for (int k = 0; k < classes; ++k) sum += exp(static_cast<double>(z[k] - z[best]));
  const double log_sum = log(sum) + z[best];
  const int label = labels[i];
  loss[i] = log_sum - z[label];
  correct[i] = best == label ? 1 : 0;
  if (dlogits == nullptr) return;
  float* d = dlogits + static_cast<size_t>(i) * classes;
  for (int k = 0; k < classes; ++k) {
    const double p = exp(z[k] - log_sum);
    d[k] = static_cast<float>(scale * (p - (k == label ? 1.0 : 0.0)));
  }
}

__global__ void sgd_kernel(float* w, const float* g, float* v, size_t n, float lr, float momentum,
                           float decay, bool first) {
  for (size_t j = start(); j < n; j += stride()) {
    const float d = g[j] + decay * w[j];
    v[j] = first ? d : momentum * v[j] + d;
    w[j] -= lr * v[j];
  }
}

// One thread per channel; statistics in double, rows in order, as LocalBatchNorm does.
__global__ void batch_norm_stats_kernel(const float* x, int n, int channels, bool training,
                                        double eps, double momentum, float* running_mean,
                                        float* running_var, double* mean, double* invstd) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  if (!training) {
    mean[c] = running_mean[c];
    invstd[c] = 1.0 / sqrt(static_cast<double>(running_var[c]) + eps);
    return;
  }
  double sum = 0, m2 = 0;
  for (int i = 0; i < n; ++i) sum += x[static_cast<size_t>(i) * channels + c];
  const double mu = sum / n;
  for (int i = 0; i < n; ++i) {
    const double d = x[static_cast<size_t>(i) * channels + c] - mu;
    m2 += d * d;
  }
  mean[c] = mu;
  invstd[c] = 1.0 / sqrt(m2 / n + eps);
  running_mean[c] = static_cast<float>((1 - momentum) * running_mean[c] + momentum * mu);
  const double unbiased = n > 1 ? m2 / (n - 1) : m2;
  running_var[c] = static_cast<float>((1 - momentum) * running_var[c] + momentum * unbiased);
}

__global__ void batch_norm_apply_kernel(const float* x, size_t total, int channels,
                                        const double* mean, const double* invstd,
                                        const float* weight, const float* bias, float* y) {
  for (size_t i = start(); i < total; i += stride()) {
    const int c = static_cast<int>(i % channels);
    const float scale = static_cast<float>(invstd[c] * weight[c]);
    const float shift = static_cast<float>(bias[c] - mean[c] * invstd[c] * weight[c]);
    y[i] = x[i] * scale + shift;
  }
}

// scratch: a (channels), b (channels), mean_dy (channels); dx = (dy - mean_dy - xmu * a) * b.
__global__ void batch_norm_grad_sums_kernel(const float* x, const float* dy, int n, int channels,
                                            bool training, const double* mean, const double* invstd,
                                            const float* weight, float* grad_weight,
                                            float* grad_bias, double* scratch) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  double sum_dy = 0, sum_dy_xmu = 0;
  for (int i = 0; i < n; ++i) {
    const size_t at = static_cast<size_t>(i) * channels + c;
    sum_dy += dy[at];
    sum_dy_xmu += dy[at] * (x[at] - mean[c]);
  }
  grad_weight[c] += static_cast<float>(sum_dy_xmu * invstd[c]);
  grad_bias[c] += static_cast<float>(sum_dy);
  scratch[c] = training ? invstd[c] * invstd[c] * sum_dy_xmu / n : 0.0;
  scratch[channels + c] = invstd[c] * weight[c];
  scratch[2 * channels + c] = training ? sum_dy / n : 0.0;
}

__global__ void batch_norm_dx_kernel(const float* x, const float* dy, size_t total, int channels,
                                     const double* mean, const double* scratch, float* dx) {
  for (size_t i = start(); i < total; i += stride()) {
    const int c = static_cast<int>(i % channels);
    const double xmu = x[i] - mean[c];
    dx[i] = static_cast<float>((dy[i] - scratch[2 * channels + c] - xmu * scratch[c]) *
                               scratch[channels + c]);
  }
}

// One thread per channel (or row), at least one block so an empty batch launches cleanly.
unsigned channel_blocks(int channels) {
  return channels > 0 ? static_cast<unsigned>((channels + 127) / 128) : 1;
}

}  // namespace

// Launch configuration errors surface through cudaGetLastError; a kernel's own faults surface
// at the next synchronising call (a copy to the host), which is checked too.
cudaError_t launch_fill(float* x, size_t n, float value) {
  fill_kernel<<<blocks_for(n), kThreads>>>(x, n, value);
  return cudaGetLastError();
}

cudaError_t launch_add(float* dst, const float* src, size_t n) {
  add_kernel<<<blocks_for(n), kThreads>>>(dst, src, n);
  return cudaGetLastError();
}

cudaError_t launch_add_bias(float* y, const float* b, int n, int out) {
  const size_t total = static_cast<size_t>(n) * out;
  add_bias_kernel<<<blocks_for(total), kThreads>>>(y, b, total, out);
  return cudaGetLastError();
}

cudaError_t launch_column_sums(const float* dy, int n, int out, float* db) {
  column_sums_kernel<<<channel_blocks(out), 128>>>(dy, n, out, db);
  return cudaGetLastError();
}

cudaError_t launch_relu_forward(float* x, size_t n) {
  relu_forward_kernel<<<blocks_for(n), kThreads>>>(x, n);
  return cudaGetLastError();
}

cudaError_t launch_relu_backward(const float* y, float* dy, size_t n) {
  relu_backward_kernel<<<blocks_for(n), kThreads>>>(y, dy, n);
  return cudaGetLastError();
}

cudaError_t launch_softmax_cross_entropy(const float* logits, const uint8_t* labels, int n,
                                         int classes, float scale, float* dlogits, double* loss,
                                         int32_t* correct) {
  softmax_cross_entropy_kernel<<<channel_blocks(n), 128>>>(logits, labels, n, classes, scale,
                                                           dlogits, loss, correct);
  return cudaGetLastError();
}

cudaError_t launch_sgd_update(float* w, const float* g, float* v, size_t n, float lr,
                              float momentum, float decay, bool first) {
  sgd_kernel<<<blocks_for(n), kThreads>>>(w, g, v, n, lr, momentum, decay, first);
  return cudaGetLastError();
}

cudaError_t launch_batch_norm_forward(const float* x, int n, int channels, bool training,
                                      double eps, double momentum, const float* weight,
                                      const float* bias, float* running_mean, float* running_var,
                                      double* mean, double* invstd, float* y) {
  batch_norm_stats_kernel<<<channel_blocks(channels), 128>>>(
      x, n, channels, training, eps, momentum, running_mean, running_var, mean, invstd);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  const size_t total = static_cast<size_t>(n) * channels;
  batch_norm_apply_kernel<<<blocks_for(total), kThreads>>>(x, total, channels, mean, invstd, weight,
                                                           bias, y);
  return cudaGetLastError();
}

cudaError_t launch_batch_norm_backward(const float* x, const float* dy, int n, int channels,
                                       bool training, const double* mean, const double* invstd,
                                       const float* weight, float* dx, float* grad_weight,
                                       float* grad_bias, double* scratch) {
  batch_norm_grad_sums_kernel<<<channel_blocks(channels), 128>>>(
      x, dy, n, channels, training, mean, invstd, weight, grad_weight, grad_bias, scratch);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  const size_t total = static_cast<size_t>(n) * channels;
  batch_norm_dx_kernel<<<blocks_for(total), kThreads>>>(x, dy, total, channels, mean, scratch, dx);
  return cudaGetLastError();
}

}  // namespace fashion_mnist::cuda
