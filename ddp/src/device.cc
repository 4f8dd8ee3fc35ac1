// The per-device dispatch of device.h: CPU loops (kernels.h) or the CUDA twins (cuda_ops.h).
#include "device.h"

#include <cstring>
#include <utility>

#include "kernels.h"
#include "procgroup/ddp/error.h"
#if defined(PROCGROUP_HAVE_CUDA)
#include "cuda/cuda_ops.h"
#endif

#if defined(PROCGROUP_HAVE_CUDA)
namespace procgroup::ddp::cuda {
void fail(pg_status_t status, const std::string& message) { throw Error(status, message); }
}  // namespace procgroup::ddp::cuda
#endif

namespace procgroup::ddp::detail {

void no_cuda() { throw Error(PG_ERR_UNSUPPORTED, "procgroup was built without CUDA"); }

std::string device_name(const Device& device) {
  if (device.type == PG_DEVICE_CPU) return "cpu";
  if (device.type == PG_DEVICE_CUDA) return "cuda:" + std::to_string(device.index);
  return "device-type-" + std::to_string(device.type);
}

void check_device(const Device& device) {
  if (device.type == PG_DEVICE_CPU) return;
  if (device.type != PG_DEVICE_CUDA) {
    throw Error(PG_ERR_INVALID_ARGUMENT, "unknown device " + device_name(device));
  }
#if defined(PROCGROUP_HAVE_CUDA)
  cuda::check_device(device.index);
#else
  no_cuda();
#endif
}

std::string bare_message(const procgroup::Error& e) {
  std::string text = e.what();
  for (const std::string& prefix : {std::string(pg_status_name(e.status())) + ": ",
                                    std::string("ddp: ")}) {
    if (text.starts_with(prefix)) text.erase(0, prefix.size());
  }
  return text;
}

std::string pointer_problem(const Device& device, const void* data) {
  if (device.type == PG_DEVICE_CPU || data == nullptr) return {};
#if defined(PROCGROUP_HAVE_CUDA)
  return cuda::pointer_problem(device.index, data);
#else
  return "procgroup was built without CUDA";
#endif
}

DeviceMemory::DeviceMemory(const Exec& exec, size_t bytes) : exec_(exec), bytes_(bytes) {
  if (exec.on_cpu()) {
    data_ = new uint64_t[(bytes + 7) / 8 + 1]();  // +1: a valid pointer even for 0 bytes
    return;
  }
#if defined(PROCGROUP_HAVE_CUDA)
  data_ = cuda::allocate(exec.device.index, exec.stream, bytes);
#else
  no_cuda();
#endif
}

DeviceMemory::DeviceMemory(DeviceMemory&& other) noexcept
    : exec_(other.exec_),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

DeviceMemory& DeviceMemory::operator=(DeviceMemory&& other) noexcept {
  if (this != &other) {
    release();
    exec_ = other.exec_;
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceMemory::~DeviceMemory() { release(); }

void DeviceMemory::release() noexcept {
  if (data_ == nullptr) return;
  if (exec_.on_cpu()) {
    delete[] static_cast<uint64_t*>(data_);
  } else {
#if defined(PROCGROUP_HAVE_CUDA)
    cuda::release(exec_.device.index, exec_.stream, data_);
#endif
  }
  data_ = nullptr;
}

void zero(const Exec& exec, void* dst, size_t bytes) {
  if (bytes == 0) return;
  if (exec.on_cpu()) {
    std::memset(dst, 0, bytes);
    return;
  }
#if defined(PROCGROUP_HAVE_CUDA)
  cuda::zero(exec.device.index, exec.stream, dst, bytes);
#else
  no_cuda();
#endif
}

void copy(const Exec& exec, void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  if (exec.on_cpu()) {
    std::memmove(dst, src, bytes);
    return;
  }
#if defined(PROCGROUP_HAVE_CUDA)
  cuda::copy(exec.device.index, exec.stream, dst, src, bytes);
#else
  no_cuda();
#endif
}

void divide_into(const Exec& exec, void* dst, const void* src, uint64_t n, pg_dtype_t dtype,
                 int divisor) {
  if (n == 0) return;
  if (exec.on_cpu()) {
    divide_into(dst, src, n, dtype, divisor);
    return;
  }
#if defined(PROCGROUP_HAVE_CUDA)
  cuda::divide_into(exec.device.index, exec.stream, dst, src, n, dtype, divisor);
#else
  no_cuda();
#endif
}

void convert(const Exec& exec, void* dst, pg_dtype_t dst_dtype, const void* src,
             pg_dtype_t src_dtype, uint64_t n) {
  if (n == 0) return;
  if (exec.on_cpu()) {
    convert(dst, dst_dtype, src, src_dtype, n);
    return;
  }
#if defined(PROCGROUP_HAVE_CUDA)
  cuda::convert(exec.device.index, exec.stream, dst, dst_dtype, src, src_dtype, n);
#else
  no_cuda();
#endif
}

void to_host(const Exec& exec, void* host, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (exec.on_cpu()) {
    std::memmove(host, src, bytes);
    return;
  }
#if defined(PROCGROUP_HAVE_CUDA)
  cuda::to_host(exec.device.index, exec.stream, host, src, bytes);
#else
  no_cuda();
#endif
}

void from_host(const Exec& exec, void* dst, const void* host, size_t bytes) {
  if (bytes == 0) return;
  if (exec.on_cpu()) {
    std::memmove(dst, host, bytes);
    return;
  }
#if defined(PROCGROUP_HAVE_CUDA)
  cuda::from_host(exec.device.index, exec.stream, dst, host, bytes);
#else
  no_cuda();
#endif
}

void synchronize_device(const Device& device) {
  if (device.type == PG_DEVICE_CPU) return;
#if defined(PROCGROUP_HAVE_CUDA)
  cuda::synchronize_device(device.index);
#else
  no_cuda();
#endif
}

}  // namespace procgroup::ddp::detail
