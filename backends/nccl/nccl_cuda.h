// nccl_cuda.h — small RAII holders for the CUDA runtime objects the backend owns.
//
//   DeviceGuard on(comm.device());   // entries run on the communicator's device and
//                                    // give the caller's thread its own device back
//   Event done;
//   PG_KIT_TRY(done.create("allreduce #3"));
#ifndef PROCGROUP_BACKENDS_NCCL_NCCL_CUDA_H_
#define PROCGROUP_BACKENDS_NCCL_NCCL_CUDA_H_

#include <cuda_runtime_api.h>

#include <string>

#include "nccl_status.h"

namespace procgroup::nccl_backend {

// Whether this thread has a current CUDA context (cuCtxGetCurrent, found through the
// runtime so the plugin need not link libcuda). Unknown counts as yes.
inline bool thread_has_context() {
  using GetCurrent = int (*)(void**);  // CUresult cuCtxGetCurrent(CUcontext*)
  static const GetCurrent get_current = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, CUDART_VERSION, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      fn = nullptr;
    }
    return reinterpret_cast<GetCurrent>(fn);
  }();
  if (get_current == nullptr) return true;
  void* context = nullptr;
  return get_current(&context) != 0 || context != nullptr;
}

// Makes `device` current on this thread and restores the previous one on destruction.
// A thread that had no context (a core thread that never touched CUDA: cudaGetDevice says
// 0 there) is left on `device`: "restoring" 0 would create a context on GPU 0 (CUDA 12+
// cudaSetDevice initialises it), hundreds of MiB on GPU 0 for every rank of the host.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (!thread_has_context() || cudaGetDevice(&previous_) != cudaSuccess) {
      (void)cudaGetLastError();
      previous_ = -1;
    }
    if (previous_ != device) status_ = cuda_status(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceGuard() {
    if (previous_ >= 0 && cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  const Status& status() const { return status_; }

 private:
  int previous_ = -1;
  Status status_;
};

// A timing-free CUDA event (create on the device it will be recorded on).
class Event {
 public:
  Event() = default;
  ~Event() {
    if (event_ != nullptr) (void)cudaEventDestroy(event_);
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Status create(const std::string& what) {
    return cuda_status(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming),
                       what + ": cudaEventCreate");
  }
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace procgroup::nccl_backend

#endif  // PROCGROUP_BACKENDS_NCCL_NCCL_CUDA_H_
