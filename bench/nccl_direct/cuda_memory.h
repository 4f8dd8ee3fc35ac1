// cuda_memory.h — collbench's CUDA pieces for -g cuda: choosing the rank's GPU, device
// buffers (bench/common/memory.h's Memory over cudaMalloc) and a Timer of CUDA events on
// the stream an engine's operations are ordered on. Every CUDA call is checked; a failure
// throws std::runtime_error naming the call and CUDA's message.
//
//   const int device = select_cuda_device(local_rank, local_world_size);  // cudaSetDevice
//   CudaMemory memory(device);
//   CudaEventTimer timer(/*stream=*/nullptr);   // the legacy default stream
#pragma once

#include <cuda_runtime.h>

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

// Events recorded on stream (null: the legacy default stream) around the timed loop; the
// stop event is waited for, so stop_us() returns once the last operation finished there.
class CudaEventTimer : public Timer {
 public:
  explicit CudaEventTimer(cudaStream_t stream);
  ~CudaEventTimer() override;
  CudaEventTimer(const CudaEventTimer&) = delete;
  CudaEventTimer& operator=(const CudaEventTimer&) = delete;
  void start() override;
  double stop_us() override;

 private:
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace procgroup::bench
