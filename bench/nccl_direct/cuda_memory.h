// cuda_memory.h — collbench's CUDA pieces for -g cuda: choosing the rank's GPU, device
// buffers (bench/common/memory.h's Memory over cudaMalloc), a Timer, and a stream. Every CUDA call is checked; a failure
// throws std::runtime_error naming the call and CUDA's message.
//
//   const int device = select_cuda_device(local_rank, local_world_size);  // cudaSetDevice
//   CudaMemory memory(device);
//   CudaWallTimer timer;   // host clock between device synchronisations
//   CudaStream stream;     // where an engine's operations run
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <string>

#include "memory.h"

namespace procgroup::bench {

// Throws "CUDA error in <what>: <message> (<name>)" unless status is cudaSuccess.
void check_cuda(cudaError_t status, const char* what);

// The device local_rank % count (PROCGROUP_NCCL_DEVICE when set, as the nccl plugin picks),
// made current. Throws, saying "no CUDA device" and why,
// when CUDA finds none, and when more ranks share this node than it has devices (NCCL
// takes one device per rank: with one GPU only one rank can run).
int select_cuda_device(int local_rank, int local_world_size);

class CudaMemory : public Memory {
 public:
  explicit CudaMemory(int device);
  std::string name() const override { return name_; }
  void* allocate(uint64_t bytes) override;
  void release(void* p) noexcept override;
  void to_device(void* dst, const void* host_src, uint64_t bytes) override;
  void to_host(void* host_dst, const void* src, uint64_t bytes) override;

 private:
  std::string name_;
};

// nccl-tests' timing, the same for procgroup and raw NCCL: the host clock from an idle
// device (start) to the end of the engine's run plus a device synchronisation (stop), so
// each side pays its own host costs of issuing and waiting.
class CudaWallTimer : public Timer {
 public:
  void start() override;
  double stop_us() override;

 private:
  std::chrono::steady_clock::time_point start_;
};

// A blocking stream (it orders itself after the legacy default stream's copies) on the
// current device, destroyed with the object.
class CudaStream {
 public:
  CudaStream();
  ~CudaStream();
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace procgroup::bench
