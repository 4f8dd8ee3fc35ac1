// cuda_kernels.h — the small kernels of the CUDA Ops (cuda_ops.cc), each launched on the
// legacy default stream. Every launcher returns the launch's cudaError_t; the caller checks.
// Arithmetic follows layers.cc line for line (per-channel and per-row sums in double, in row
// order), so a CUDA run and a CPU run differ only by float rounding in the matrix products.
//
//   check(launch_relu_forward(y, n), "relu");
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace fashion_mnist::cuda {

cudaError_t launch_fill(float* x, size_t n, float value);
cudaError_t launch_add(float* dst, const float* src, size_t n);  // dst += src
// y (n x out, row-major) += b per row.
cudaError_t launch_add_bias(float* y, const float* b, int n, int out);
// db[o] += sum over rows of dy[i][o], rows in order.
cudaError_t launch_column_sums(const float* dy, int n, int out, float* db);
cudaError_t launch_relu_forward(float* x, size_t n);
cudaError_t launch_relu_backward(const float* y, float* dy, size_t n);
// Per row: loss[i] = logsumexp(z) - z[label], correct[i] = argmax == label (first maximum);
// dlogits (may be null) = scale * (softmax - onehot).
cudaError_t launch_softmax_cross_entropy(const float* logits, const uint8_t* labels, int n,
                                         int classes, float scale, float* dlogits, double* loss,
                                         int32_t* correct);
cudaError_t launch_sgd_update(float* w, const float* g, float* v, size_t n, float lr,
                              float momentum, float decay, bool first);

// Batch norm over x (n x channels, row-major). Training: mean and invstd of the batch
// (biased variance) and the running statistics updated (unbiased variance); eval: from the
// running statistics. Then y = x * scale + shift per channel.
cudaError_t launch_batch_norm_forward(const float* x, int n, int channels, bool training,
                                      double eps, double momentum, const float* weight,
                                      const float* bias, float* running_mean, float* running_var,
                                      double* mean, double* invstd, float* y);
// For that forward: grad_weight and grad_bias accumulate, dx is overwritten; scratch holds
// 3 * channels doubles.
cudaError_t launch_batch_norm_backward(const float* x, const float* dy, int n, int channels,
                                       bool training, const double* mean, const double* invstd,
                                       const float* weight, float* dx, float* grad_weight,
                                       float* grad_bias, double* scratch);

}  // namespace fashion_mnist::cuda
