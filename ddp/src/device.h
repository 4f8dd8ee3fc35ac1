// device.h — where ddp's element loops and copies run: one call per operation, taking an
// Exec (device + stream) and choosing the CPU loop or the CUDA kernel, so the Reducer,
// hooks, broadcasts and SyncBatchNorm have a single code path for every device.
// Internal to ddp.
//
//   detail::Exec on{Device{PG_DEVICE_CUDA, 0}, stream};
//   detail::DeviceMemory bucket(on, bytes);                  // zeroed, freed in stream order
//   detail::divide_into(on, bucket.data(), grad, n, PG_DTYPE_F32, world_size);
//
// CUDA work is enqueued on exec.stream (NULL: the legacy default stream), in call order, so
// no extra synchronisation is needed between the steps of one stream. Every CUDA failure
// becomes a ddp::Error carrying cudaGetErrorString. A build without CUDA throws
// PG_ERR_UNSUPPORTED "procgroup was built without CUDA" for any CUDA Exec.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "procgroup/ddp/tensor.h"

namespace procgroup::ddp::detail {

// Throws PG_ERR_UNSUPPORTED "procgroup was built without CUDA" (CUDA paths of a CPU-only build).
[[noreturn]] void no_cuda();

struct Exec {
  Device device{};
  void* stream = nullptr;  // cudaStream_t; ignored on the CPU
  bool on_cpu() const { return device.type == PG_DEVICE_CPU; }
};

// "cpu", "cuda:1".
std::string device_name(const Device& device);

// Throws ddp::Error unless memory on `device` can be used here: PG_ERR_UNSUPPORTED for a
// build without CUDA or when no CUDA device is present, PG_ERR_INVALID_ARGUMENT for an
// unknown device type or an index beyond the devices present.
void check_device(const Device& device);

// An error's message without its "STATUS: " and "ddp: " prefixes (to embed it in another).
std::string bare_message(const procgroup::Error& e);

// Empty when `data` is memory on `device` (always for the CPU), else why not. Call after
// check_device succeeded.
std::string pointer_problem(const Device& device, const void* data);

// Zero-initialised memory on exec.device, 8-byte aligned; CUDA memory is allocated and
// freed in stream order on exec.stream. Move-only.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(const Exec& exec, size_t bytes);
  DeviceMemory(DeviceMemory&& other) noexcept;
  DeviceMemory& operator=(DeviceMemory&& other) noexcept;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory();

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  void release() noexcept;
  Exec exec_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// dst and src on exec.device. Asynchronous on CUDA (stream order).
void zero(const Exec& exec, void* dst, size_t bytes);
void copy(const Exec& exec, void* dst, const void* src, size_t bytes);
// dst[i] = src[i] / divisor in dtype (halves compute in float); dst may equal src.
void divide_into(const Exec& exec, void* dst, const void* src, uint64_t n, pg_dtype_t dtype,
                 int divisor);
// Between floating dtypes (halves through float), round to nearest even.
void convert(const Exec& exec, void* dst, pg_dtype_t dst_dtype, const void* src,
             pg_dtype_t src_dtype, uint64_t n);

// Host <-> exec.device. to_host returns once host holds the data (after the stream's
// earlier work); from_host returns once host may be reused (the copy is in stream order).
void to_host(const Exec& exec, void* host, const void* src, size_t bytes);
void from_host(const Exec& exec, void* dst, const void* host, size_t bytes);
// Waits for every stream of the device (checkpoints: work on any stream is complete).
void synchronize_device(const Device& device);

}  // namespace procgroup::ddp::detail
