// batch_norm_kernels.h — the per-element and per-channel work of SyncBatchNorm on x laid out
// n x C x spatial, on the CPU or (same contract) in CUDA kernels on exec's stream. All
// pointers are memory on exec.device. Statistics are accumulated in double on both, so CPU
// and CUDA results agree to rounding. Internal to ddp.
//
// stats is [mean(C), invstd(C), unbiased variance(C)] (the last only for bn_update_running).
#pragma once

#include <cstdint>

#include "device.h"

namespace procgroup::ddp::detail {

struct BnShape {
  int64_t n = 0, channels = 0, spatial = 1;
};

// row = [count, mean(C), invstd(C)] of x, two passes in double; all zero when n == 0.
void bn_local_stats(const Exec& exec, const BnShape& shape, const float* x, double eps,
                    double* row);
// stats = [running_mean, 1 / sqrt(running_var + eps)] (eval).
void bn_running_to_stats(const Exec& exec, int64_t channels, const float* running_mean,
                         const float* running_var, double eps, double* stats);
// running = (1 - momentum) * running + momentum * batch statistic.
void bn_update_running(const Exec& exec, int64_t channels, float* running_mean,
                       float* running_var, const double* stats, double momentum);
// y = (x - mean) * invstd * weight + bias; weight and bias NULL: 1 and 0.
void bn_normalize(const Exec& exec, const BnShape& shape, const float* x, float* y,
                  const double* stats, const float* weight, const float* bias);
// sums = [sum(dy), sum(dy * (x - mean))] per channel; grad_weight = sum_dy_xmu * invstd and
// grad_bias = sum_dy where not NULL.
void bn_backward_reduce(const Exec& exec, const BnShape& shape, const float* x, const float* dy,
                        const double* stats, double* sums, float* grad_weight, float* grad_bias);
// dx from dy; with batch statistics (total > 0) sums are the global ones over total values,
// without (total == 0, eval) sums is ignored and may be NULL.
void bn_backward_input(const Exec& exec, const BnShape& shape, const float* x, const float* dy,
                       float* dx, const double* stats, const float* weight, const double* sums,
                       double total);

}  // namespace procgroup::ddp::detail
