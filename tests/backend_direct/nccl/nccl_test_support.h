// nccl_test_support.h — what the nccl plugin's tests share: whether this host has a CUDA
// device (and CUDA's error when it has none), and a group of the plugin through
// libprocgroup on ranks as threads, with a file store in a private directory.
//
//   std::string why;
//   if (cuda_device_count(&why) == 0) GTEST_SKIP() << why;   // "no CUDA device: ..."
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace procgroup::nccl_test {

// The number of CUDA devices; 0 with *why = "no CUDA device: <CUDA's error>" otherwise.
inline int cuda_device_count(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    *why = std::string("no CUDA device: ") + cudaGetErrorString(err) + " (" +
           cudaGetErrorName(err) + ")";
    return 0;
  }
  if (count == 0) *why = "no CUDA device: cudaGetDeviceCount found 0 devices";
  return count;
}

}  // namespace procgroup::nccl_test
