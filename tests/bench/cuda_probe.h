// cuda_probe.h — whether this machine can run the CUDA paths, asked the way the programs ask
// (cudaGetDeviceCount), so a test can expect the programs' exact reason or skip.
//
//   const CudaProbe cuda = probe_cuda();
//   if (cuda.devices == 0) GTEST_SKIP() << "no CUDA device: " << cuda.reason;
#pragma once

#include <string>
#ifdef PROCGROUP_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace procgroup::testing {

struct CudaProbe {
  bool built = false;  // compiled with CUDA (PROCGROUP_HAVE_CUDA)
  int devices = 0;
  std::string reason;  // why devices == 0: CUDA's error string, or "built without CUDA"
};

inline CudaProbe probe_cuda() {
  CudaProbe p;
#ifdef PROCGROUP_HAVE_CUDA
  p.built = true;
  const cudaError_t e = cudaGetDeviceCount(&p.devices);
  if (e != cudaSuccess) {
    p.devices = 0;
    p.reason = cudaGetErrorString(e);
  } else if (p.devices == 0) {
    p.reason = "cudaGetDeviceCount found none";
  }
#else
  p.reason = "built without CUDA";
#endif
  return p;
}

}  // namespace procgroup::testing
