// collbench's CUDA device, memory and timer (see cuda_memory.h).
#include "cuda_memory.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace procgroup::bench {

void check_cuda(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  throw std::runtime_error(std::string("CUDA error in ") + what + ": " +
                           cudaGetErrorString(status) + " (" + cudaGetErrorName(status) + ")");
}

int select_cuda_device(int local_rank, int local_world_size) {
  int count = 0;
  const cudaError_t found = cudaGetDeviceCount(&count);
  if (found != cudaSuccess) {
    throw std::runtime_error(std::string("-g cuda: no CUDA device: ") + cudaGetErrorString(found) +
                             " (cudaGetDeviceCount: " + cudaGetErrorName(found) + ")");
  }
  if (count <= 0)
    throw std::runtime_error("-g cuda: no CUDA device: cudaGetDeviceCount found none");
  // The nccl plugin puts this rank's communicator on PROCGROUP_NCCL_DEVICE when it is set
  // (else on LOCAL_RANK), and refuses buffers of any other device: take the same one.
  if (const char* env = std::getenv("PROCGROUP_NCCL_DEVICE"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (*end != '\0' || v < 0 || v >= count) {
      throw std::runtime_error("-g cuda: PROCGROUP_NCCL_DEVICE='" + std::string(env) +
                               "' is not a device index below " + std::to_string(count));
    }
    check_cuda(cudaSetDevice(static_cast<int>(v)), "cudaSetDevice");
    return static_cast<int>(v);
  }
  // NCCL refuses two ranks on one GPU; more ranks than GPUs cannot be measured honestly.
  if (local_world_size > count) {
    throw std::runtime_error("-g cuda: " + std::to_string(local_world_size) +
                             " ranks on this node but " + std::to_string(count) +
                             " CUDA device(s); NCCL needs a device of its own for every rank "
                             "(with one GPU, run one rank)");
  }
  const int device = (local_rank < 0 ? 0 : local_rank) % count;
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  return device;
}

CudaMemory::CudaMemory(int device) {
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  name_ = "cuda:" + std::to_string(device) + " (" + prop.name + ")";
}

void* CudaMemory::allocate(uint64_t bytes) {
  void* p = nullptr;
  check_cuda(cudaMalloc(&p, bytes == 0 ? 1 : bytes), "cudaMalloc");
  const cudaError_t zeroed = cudaMemset(p, 0, bytes == 0 ? 1 : bytes);
  if (zeroed != cudaSuccess) cudaFree(p);
  check_cuda(zeroed, "cudaMemset");
  return p;
}

void CudaMemory::release(void* p) noexcept {
  if (p != nullptr) cudaFree(p);  // nothing useful to do about a failure while freeing
}

// cudaMemcpy is ordered after the legacy default stream and complete on return.
void CudaMemory::to_device(void* dst, const void* host_src, uint64_t bytes) {
  if (bytes > 0)
    check_cuda(cudaMemcpy(dst, host_src, bytes, cudaMemcpyHostToDevice), "copy to GPU");
}

void CudaMemory::to_host(void* host_dst, const void* src, uint64_t bytes) {
  if (bytes > 0)
    check_cuda(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost), "copy to host");
}

void CudaWallTimer::start() {
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  start_ = std::chrono::steady_clock::now();
}

double CudaWallTimer::stop_us() {
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start_)
      .count();
}

CudaStream::CudaStream() { check_cuda(cudaStreamCreate(&stream_), "cudaStreamCreate"); }

CudaStream::~CudaStream() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

}  // namespace procgroup::bench
