// Memory, copies and device checks of cuda_ops.h on the CUDA runtime. Memory is allocated
// and freed in stream order (cudaMallocAsync / cudaFreeAsync), so freeing never races the
// kernels and copies enqueued before it on the same stream.
#include <string>

#include "cuda_check.h"
#include "cuda_ops.h"

namespace procgroup::ddp::cuda {

void check_device(int device) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    fail(PG_ERR_UNSUPPORTED, std::string("no CUDA device: ") + cudaGetErrorString(e));
  }
  if (count == 0) fail(PG_ERR_UNSUPPORTED, "no CUDA device: cudaGetDeviceCount found 0");
  if (device < 0 || device >= count) {
    fail(PG_ERR_INVALID_ARGUMENT, "cuda:" + std::to_string(device) + " does not exist (" +
                                             std::to_string(count) + " CUDA devices)");
  }
}

std::string pointer_problem(int device, const void* data) {
  cudaPointerAttributes a{};
  const cudaError_t e = cudaPointerGetAttributes(&a, data);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("cudaPointerGetAttributes failed: ") + cudaGetErrorString(e);
  }
  const std::string want = "cuda:" + std::to_string(device);
  if (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged) {
    if (a.device == device) return {};
    return "is memory on cuda:" + std::to_string(a.device) + ", not " + want;
  }
  return "is host memory, not memory on " + want;
}

void* allocate(int device, void* stream, size_t bytes) {
  DeviceGuard guard(device);
  void* p = nullptr;
  // At least one element's worth, so that an empty bucket still has a distinct address.
  const size_t n = bytes == 0 ? 8 : bytes;
  check(cudaMallocAsync(&p, n, as_stream(stream)), "cudaMallocAsync");
  const cudaError_t e = cudaMemsetAsync(p, 0, n, as_stream(stream));
  if (e != cudaSuccess) {
    (void)cudaFreeAsync(p, as_stream(stream));
    check(e, "cudaMemsetAsync");
  }
  return p;
}

void release(int device, void* stream, void* data) noexcept {
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
  if (previous != device) (void)cudaSetDevice(device);
  // Errors cannot be reported from a destructor; a failed free leaks, nothing worse.
  if (cudaFreeAsync(data, as_stream(stream)) != cudaSuccess) (void)cudaGetLastError();
  if (previous >= 0 && previous != device) (void)cudaSetDevice(previous);
}

void zero(int device, void* stream, void* dst, size_t bytes) {
  DeviceGuard guard(device);
  check(cudaMemsetAsync(dst, 0, bytes, as_stream(stream)), "cudaMemsetAsync");
}

void copy(int device, void* stream, void* dst, const void* src, size_t bytes) {
  DeviceGuard guard(device);
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, as_stream(stream)),
        "cudaMemcpyAsync (device to device)");
}

void to_host(int device, void* stream, void* host, const void* src, size_t bytes) {
  DeviceGuard guard(device);
  check(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, as_stream(stream)),
        "cudaMemcpyAsync (device to host)");
  check(cudaStreamSynchronize(as_stream(stream)), "cudaStreamSynchronize");
}

void from_host(int device, void* stream, void* dst, const void* host, size_t bytes) {
  DeviceGuard guard(device);
  check(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, as_stream(stream)),
        "cudaMemcpyAsync (host to device)");
  // The caller may free `host` on return, and it may be pinned memory (truly async).
  check(cudaStreamSynchronize(as_stream(stream)), "cudaStreamSynchronize");
}

void synchronize_device(int device) {
  DeviceGuard guard(device);
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

}  // namespace procgroup::ddp::cuda
