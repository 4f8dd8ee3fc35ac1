// cuda_ops.h — the CUDA side of device.h and batch_norm_kernels.h, implemented in the .cu
// files of this folder, which are compiled (by nvcc) only when PROCGROUP_HAVE_CUDA. Plain
// C++ declarations: callers never see a CUDA header. Streams are cudaStream_t as void*.
// Every function makes `device` current for the call (restoring the caller's) and turns a
// CUDA error into ddp::Error(PG_ERR_BACKEND, "...: <cudaGetErrorString>"). The .cu files see
// only this header and procgroup.h (C), so nvcc compiles them as C++17.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "procgroup/procgroup.h"

namespace procgroup::ddp::cuda {

// Throws ddp::Error(status, message); defined in device.cc, which sees the C++ API.
[[noreturn]] void fail(pg_status_t status, const std::string& message);

void check_device(int device);
std::string pointer_problem(int device, const void* data);

void* allocate(int device, void* stream, size_t bytes);  // zeroed
void release(int device, void* stream, void* data) noexcept;
void zero(int device, void* stream, void* dst, size_t bytes);
void copy(int device, void* stream, void* dst, const void* src, size_t bytes);
void to_host(int device, void* stream, void* host, const void* src, size_t bytes);
void from_host(int device, void* stream, void* dst, const void* host, size_t bytes);
void synchronize_device(int device);

void divide_into(int device, void* stream, void* dst, const void* src, uint64_t n,
                 pg_dtype_t dtype, int divisor);
void convert(int device, void* stream, void* dst, pg_dtype_t dst_dtype, const void* src,
             pg_dtype_t src_dtype, uint64_t n);

}  // namespace procgroup::ddp::cuda

// SyncBatchNorm (batch_norm_kernels.h), x of n x C x S floats.
namespace procgroup::ddp::cuda {

void bn_local_stats(int device, void* stream, int64_t n, int64_t C, int64_t S, const float* x,
                    double eps, double* row);
void bn_running_to_stats(int device, void* stream, int64_t C, const float* running_mean,
                         const float* running_var, double eps, double* stats);
void bn_update_running(int device, void* stream, int64_t C, float* running_mean,
                       float* running_var, const double* stats, double momentum);
void bn_normalize(int device, void* stream, int64_t n, int64_t C, int64_t S, const float* x,
                  float* y, const double* stats, const float* weight, const float* bias);
void bn_backward_reduce(int device, void* stream, int64_t n, int64_t C, int64_t S,
                        const float* x, const float* dy, const double* stats, double* sums,
                        float* grad_weight, float* grad_bias);
void bn_backward_input(int device, void* stream, int64_t n, int64_t C, int64_t S,
                       const float* x, const float* dy, float* dx, const double* stats,
                       const float* weight, const double* sums, double total);

}  // namespace procgroup::ddp::cuda
