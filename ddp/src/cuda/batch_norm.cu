// SyncBatchNorm kernels (batch_norm_kernels.h on the GPU). Per-channel reductions use one
// block per channel with double accumulators and a shared-memory tree, so statistics carry
// the same precision as the CPU loops; element-wise kernels use grid-stride loops.
#include "cuda_check.h"
#include "cuda_ops.h"

namespace procgroup::ddp::cuda {
namespace {

__device__ size_t index_of(int64_t j, int64_t c, int64_t C, int64_t S) {
  // j-th value of channel c: sample j / S, position j % S.
  return static_cast<size_t>(((j / S) * C + c) * S + j % S);
}

// Sums v over the block into shared memory; every thread gets the total. The halving tree
// needs a power-of-two block (every launch below uses kThreads).
static_assert((kThreads & (kThreads - 1)) == 0, "block_sum needs a power-of-two block");
__device__ double block_sum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();  // shared is reused by the next call
  return total;
}

__global__ void local_stats_kernel(int64_t n, int64_t C, int64_t S, const float* x, double eps,
                                   double* row) {
  __shared__ double shared[kThreads];
  const int64_t c = blockIdx.x;
  const int64_t values = n * S;
  const double count = static_cast<double>(values);
  if (c == 0 && threadIdx.x == 0) row[0] = count;
  if (values == 0) {
    if (threadIdx.x == 0) row[1 + c] = row[1 + C + c] = 0.0;
    return;
  }
  double sum = 0;
  for (int64_t j = threadIdx.x; j < values; j += blockDim.x) sum += x[index_of(j, c, C, S)];
  const double mean = block_sum(sum, shared) / count;
  double m2 = 0;
  for (int64_t j = threadIdx.x; j < values; j += blockDim.x) {
    const double d = x[index_of(j, c, C, S)] - mean;
    m2 += d * d;
  }
  m2 = block_sum(m2, shared);
  if (threadIdx.x == 0) {
    row[1 + c] = mean;
    row[1 + C + c] = 1.0 / sqrt(m2 / count + eps);
  }
}

__global__ void running_to_stats_kernel(int64_t C, const float* rm, const float* rv, double eps,
                                        double* stats) {
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < C;
       c += int64_t{gridDim.x} * blockDim.x) {
    stats[c] = rm[c];
    stats[C + c] = 1.0 / sqrt(static_cast<double>(rv[c]) + eps);
  }
}

__global__ void update_running_kernel(int64_t C, float* rm, float* rv, const double* stats,
                                      double m) {
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < C;
       c += int64_t{gridDim.x} * blockDim.x) {
    rm[c] = static_cast<float>((1 - m) * rm[c] + m * stats[c]);
    rv[c] = static_cast<float>((1 - m) * rv[c] + m * stats[2 * C + c]);
  }
}

__global__ void normalize_kernel(int64_t total, int64_t C, int64_t S, const float* x, float* y,
                                 const double* stats, const float* weight, const float* bias) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < total;
       j += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c = (j / S) % C;
    const double scale = stats[C + c] * (weight ? weight[c] : 1.0f);
    const double shift = bias ? bias[c] : 0.0f;
    y[j] = static_cast<float>((x[j] - stats[c]) * scale + shift);
  }
}

__global__ void backward_reduce_kernel(int64_t n, int64_t C, int64_t S, const float* x,
                                       const float* dy, const double* stats, double* sums,
                                       float* gw, float* gb) {
  __shared__ double shared[kThreads];
  const int64_t c = blockIdx.x;
  const double mean = stats[c];
  double sum_dy = 0, sum_dy_xmu = 0;
  for (int64_t j = threadIdx.x; j < n * S; j += blockDim.x) {
    const size_t k = index_of(j, c, C, S);
    sum_dy += dy[k];
    sum_dy_xmu += dy[k] * (x[k] - mean);
  }
  sum_dy = block_sum(sum_dy, shared);
  sum_dy_xmu = block_sum(sum_dy_xmu, shared);
  if (threadIdx.x == 0) {
    sums[c] = sum_dy;
    sums[C + c] = sum_dy_xmu;
    if (gw) gw[c] = static_cast<float>(sum_dy_xmu * stats[C + c]);
    if (gb) gb[c] = static_cast<float>(sum_dy);
  }
}

__global__ void backward_input_kernel(int64_t total_values, int64_t C, int64_t S,
                                      const float* x, const float* dy, float* dx,
                                      const double* stats, const float* weight,
                                      const double* sums, double count) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < total_values;
       j += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c = (j / S) % C;
    const double w = weight ? weight[c] : 1.0;
    const double invstd = stats[C + c];
    const double mean_dy = count > 0 ? sums[c] / count : 0.0;
    const double mean_dy_xmu = count > 0 ? sums[C + c] / count : 0.0;
    const double xmu = x[j] - stats[c];
    dx[j] = static_cast<float>((dy[j] - mean_dy - xmu * invstd * invstd * mean_dy_xmu) *
                               invstd * w);
  }
}

}  // namespace

void bn_local_stats(int device, void* stream, int64_t n, int64_t C, int64_t S, const float* x,
                    double eps, double* row) {
  if (C <= 0) {  // a 0-block grid is a launch error; the row is just [count]
    const double count = static_cast<double>(n * S);
    from_host(device, stream, row, &count, sizeof count);
    return;
  }
  DeviceGuard guard(device);
  local_stats_kernel<<<static_cast<unsigned>(C), kThreads, 0, as_stream(stream)>>>(n, C, S, x,
                                                                                  eps, row);
  check_launch("SyncBatchNorm statistics kernel");
}

void bn_running_to_stats(int device, void* stream, int64_t C, const float* rm, const float* rv,
                         double eps, double* stats) {
  DeviceGuard guard(device);
  running_to_stats_kernel<<<blocks_for(C), kThreads, 0, as_stream(stream)>>>(C, rm, rv, eps,
                                                                            stats);
  check_launch("SyncBatchNorm running statistics kernel");
}

void bn_update_running(int device, void* stream, int64_t C, float* rm, float* rv,
                       const double* stats, double momentum) {
  DeviceGuard guard(device);
  update_running_kernel<<<blocks_for(C), kThreads, 0, as_stream(stream)>>>(C, rm, rv, stats,
                                                                          momentum);
  check_launch("SyncBatchNorm running update kernel");
}

void bn_normalize(int device, void* stream, int64_t n, int64_t C, int64_t S, const float* x,
                  float* y, const double* stats, const float* weight, const float* bias) {
  const int64_t total = n * C * S;
  if (total == 0) return;
  DeviceGuard guard(device);
  normalize_kernel<<<blocks_for(total), kThreads, 0, as_stream(stream)>>>(total, C, S, x, y,
                                                                         stats, weight, bias);
  check_launch("SyncBatchNorm normalize kernel");
}

void bn_backward_reduce(int device, void* stream, int64_t n, int64_t C, int64_t S,
                        const float* x, const float* dy, const double* stats, double* sums,
                        float* gw, float* gb) {
  if (C <= 0) return;  // nothing to reduce (and a 0-block grid is a launch error)
  DeviceGuard guard(device);
  backward_reduce_kernel<<<static_cast<unsigned>(C), kThreads, 0, as_stream(stream)>>>(
      n, C, S, x, dy, stats, sums, gw, gb);
  check_launch("SyncBatchNorm backward reduction kernel");
}

void bn_backward_input(int device, void* stream, int64_t n, int64_t C, int64_t S,
                       const float* x, const float* dy, float* dx, const double* stats,
                       const float* weight, const double* sums, double total) {
  const int64_t values = n * C * S;
  if (values == 0) return;
  DeviceGuard guard(device);
  backward_input_kernel<<<blocks_for(values), kThreads, 0, as_stream(stream)>>>(
      values, C, S, x, dy, dx, stats, weight, sums, total);
  check_launch("SyncBatchNorm backward input kernel");
}

}  // namespace procgroup::ddp::cuda
