// The element loops of kernels.h on the GPU: the 1/world_size pre-division of gradients and
// the dtype conversions of the compression hooks. Rounding matches the CPU twin exactly:
// IEEE float/double division, halves through float with round-to-nearest-even.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_check.h"
#include "cuda_ops.h"

namespace procgroup::ddp::cuda {
namespace {

__device__ double load(const void* p, pg_dtype_t dtype, uint64_t i) {
  switch (dtype) {
    case PG_DTYPE_F32: return static_cast<const float*>(p)[i];
    case PG_DTYPE_F64: return static_cast<const double*>(p)[i];
    case PG_DTYPE_F16: return __half2float(static_cast<const __half*>(p)[i]);
    default: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  }
}

// As the CPU's store(): halves are rounded from float, not from double.
__device__ void store(void* p, pg_dtype_t dtype, uint64_t i, double v) {
  switch (dtype) {
    case PG_DTYPE_F32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case PG_DTYPE_F64: static_cast<double*>(p)[i] = v; break;
    case PG_DTYPE_F16:
      static_cast<__half*>(p)[i] = __float2half_rn(static_cast<float>(v));
      break;
    default:
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(static_cast<float>(v));
      break;
  }
}

template <class T>
__global__ void divide_kernel(T* dst, const T* src, uint64_t n, T divisor) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    dst[i] = src[i] / divisor;
  }
}

__global__ void divide_half_kernel(void* dst, const void* src, uint64_t n, pg_dtype_t dtype,
                                   float divisor) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const float v = static_cast<float>(load(src, dtype, i)) / divisor;
    store(dst, dtype, i, v);
  }
}

__global__ void convert_kernel(void* dst, pg_dtype_t dst_dtype, const void* src,
                               pg_dtype_t src_dtype, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += uint64_t{gridDim.x} * blockDim.x) {
    store(dst, dst_dtype, i, load(src, src_dtype, i));
  }
}

}  // namespace

void divide_into(int device, void* stream, void* dst, const void* src, uint64_t n,
                 pg_dtype_t dtype, int divisor) {
  DeviceGuard guard(device);
  const cudaStream_t s = as_stream(stream);
  switch (dtype) {
    case PG_DTYPE_F32:
      divide_kernel<<<blocks_for(n), kThreads, 0, s>>>(
          static_cast<float*>(dst), static_cast<const float*>(src), n, static_cast<float>(divisor));
      break;
    case PG_DTYPE_F64:
      divide_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<double*>(dst),
                                                       static_cast<const double*>(src), n,
                                                       static_cast<double>(divisor));
      break;
    case PG_DTYPE_F16:
    case PG_DTYPE_BF16:
      divide_half_kernel<<<blocks_for(n), kThreads, 0, s>>>(dst, src, n, dtype,
                                                            static_cast<float>(divisor));
      break;
    default: return;  // callers accept floating dtypes only
  }
  check_launch("divide_into kernel");
}

void convert(int device, void* stream, void* dst, pg_dtype_t dst_dtype, const void* src,
             pg_dtype_t src_dtype, uint64_t n) {
  DeviceGuard guard(device);
  if (dst_dtype == src_dtype) {
    const size_t bytes = n * (dst_dtype == PG_DTYPE_F64 ? 8 : dst_dtype == PG_DTYPE_F32 ? 4 : 2);
    if (dst != src) {
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, as_stream(stream)),
            "cudaMemcpyAsync (device to device)");
    }
    return;
  }
  convert_kernel<<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(dst, dst_dtype, src,
                                                                   src_dtype, n);
  check_launch("convert kernel");
}

}  // namespace procgroup::ddp::cuda
