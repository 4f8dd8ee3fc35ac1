// cuda_check.h — error checking and the current-device guard shared by the .cu files of
// ddp (included only by them). Every CUDA call of ddp goes through check().
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cuda_ops.h"

namespace procgroup::ddp::cuda {

// Throws ddp::Error(PG_ERR_BACKEND) naming the call. cudaGetLastError() resets a
// non-sticky error so that it is not reported again by an unrelated later call.
inline void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  fail(PG_ERR_BACKEND, std::string(what) + " failed: " + cudaGetErrorString(e));
}

// After a kernel launch: a bad configuration or a missing kernel image shows here.
inline void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

inline cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

// Makes `device` current for the scope, restoring the caller's current device after.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    check(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device) check(cudaSetDevice(device), "cudaSetDevice");
    else previous_ = -1;
  }
  ~DeviceGuard() {
    if (previous_ >= 0) (void)cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// Grid for a grid-stride loop over n elements.
constexpr int kThreads = 256;
inline unsigned blocks_for(uint64_t n) {
  const uint64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 4096 ? (b == 0 ? 1 : b) : 4096);
}

}  // namespace procgroup::ddp::cuda
