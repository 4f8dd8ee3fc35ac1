#include "device_test_util.h"

#include <cstring>
#include <stdexcept>
#include <utility>

#if defined(DDP_TEST_HAVE_CUDA)
#include <cuda_runtime.h>
#endif

namespace procgroup::ddp::testing {
namespace {

#if defined(DDP_TEST_HAVE_CUDA)
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
  }
}
#else
[[noreturn]] void no_cuda() { throw std::runtime_error("procgroup was built without CUDA"); }
#endif

}  // namespace

std::string cuda_unavailable() {
#if defined(DDP_TEST_HAVE_CUDA)
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("no CUDA device: ") + cudaGetErrorString(e);
  }
  if (count == 0) return "no CUDA device: cudaGetDeviceCount found 0";
  return {};
#else
  return "procgroup was built without CUDA";
#endif
}

void synchronize(Device device) {
  if (device.type == PG_DEVICE_CPU) return;
#if defined(DDP_TEST_HAVE_CUDA)
  check(cudaSetDevice(device.index), "cudaSetDevice");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
#else
  no_cuda();
#endif
}

void copy_to_host(Device device, void* host, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (device.type == PG_DEVICE_CPU) {
    std::memcpy(host, src, bytes);
    return;
  }
#if defined(DDP_TEST_HAVE_CUDA)
  synchronize(device);
  check(cudaMemcpy(host, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
#else
  no_cuda();
#endif
}

std::vector<DeviceCase> device_cases() {
  std::vector<DeviceCase> out = {{"cpu_loopback", {}, "loopback"}};
#if defined(DDP_TEST_STAGING_PLUGIN)
  out.push_back({"cuda_staging", {PG_DEVICE_CUDA, 0}, DDP_TEST_STAGING_PLUGIN});
  out.push_back({"cuda_stagingcudaonly", {PG_DEVICE_CUDA, 0}, DDP_TEST_STAGING_CUDA_PLUGIN});
#endif
#if defined(DDP_TEST_NCCL_PLUGIN)
  out.push_back({"cuda_nccl", {PG_DEVICE_CUDA, 0}, DDP_TEST_NCCL_PLUGIN, 1});
#endif
  return out;
}

DeviceBytes::DeviceBytes(Device device, size_t bytes) : device_(device) {
  if (device.type == PG_DEVICE_CPU) {
    host_.assign(bytes + 8, 0);
    data_ = host_.data();
    return;
  }
#if defined(DDP_TEST_HAVE_CUDA)
  check(cudaSetDevice(device.index), "cudaSetDevice");
  check(cudaMalloc(&data_, bytes + 8), "cudaMalloc");
  check(cudaMemset(data_, 0, bytes + 8), "cudaMemset");
#else
  no_cuda();
#endif
}

DeviceBytes::~DeviceBytes() {
#if defined(DDP_TEST_HAVE_CUDA)
  if (device_.type != PG_DEVICE_CPU && data_ != nullptr) {
    (void)cudaDeviceSynchronize();  // no kernel of a test may still use it
    (void)cudaFree(data_);
  }
#endif
}

DeviceBytes::DeviceBytes(DeviceBytes&& other) noexcept
    : device_(other.device_), data_(std::exchange(other.data_, nullptr)),
      host_(std::move(other.host_)) {}

void DeviceBytes::upload(const void* host, size_t bytes, size_t offset) {
  if (bytes == 0) return;
  auto* dst = static_cast<unsigned char*>(data_) + offset;
  if (device_.type == PG_DEVICE_CPU) {
    std::memcpy(dst, host, bytes);
    return;
  }
#if defined(DDP_TEST_HAVE_CUDA)
  check(cudaSetDevice(device_.index), "cudaSetDevice");
  check(cudaMemcpy(dst, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
#endif
}

void DeviceBytes::download(void* host, size_t bytes, size_t offset) const {
  if (bytes == 0) return;
  const auto* src = static_cast<const unsigned char*>(data_) + offset;
  if (device_.type == PG_DEVICE_CPU) {
    std::memcpy(host, src, bytes);
    return;
  }
#if defined(DDP_TEST_HAVE_CUDA)
  check(cudaSetDevice(device_.index), "cudaSetDevice");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");  // work on any stream is done
  check(cudaMemcpy(host, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
#endif
}

TestStream::TestStream(Device device) : device_(device) {
  if (device.type == PG_DEVICE_CPU) return;
#if defined(DDP_TEST_HAVE_CUDA)
  check(cudaSetDevice(device.index), "cudaSetDevice");
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  stream_ = s;
#else
  no_cuda();
#endif
}

TestStream::~TestStream() {
#if defined(DDP_TEST_HAVE_CUDA)
  if (stream_ != nullptr) {
    (void)cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
    (void)cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  }
#endif
}

void TestStream::synchronize() const {
#if defined(DDP_TEST_HAVE_CUDA)
  if (device_.type != PG_DEVICE_CPU) {
    check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), "cudaStreamSynchronize");
  }
#endif
}

void TestStream::upload_async(void* dst, const void* host, size_t bytes) const {
  if (device_.type == PG_DEVICE_CPU) {
    std::memcpy(dst, host, bytes);
    return;
  }
#if defined(DDP_TEST_HAVE_CUDA)
  check(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice,
                        static_cast<cudaStream_t>(stream_)),
        "cudaMemcpyAsync");
#endif
}

}  // namespace procgroup::ddp::testing
