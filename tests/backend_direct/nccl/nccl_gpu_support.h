// nccl_gpu_support.h — for the GPU tests: groups of the nccl backend on ranks as threads
// (one CUDA device each) and device buffers staged from host values of any dtype. The
// results of every collective are judged by conformance_test --device cuda.
//
//   auto groups = make_groups(2, "g");                   // rank r on cuda:r
//   DeviceBuffer d(PG_DTYPE_F16, 5, /*device=*/0);
//   d.upload({1, 2, 3, 4, 5});
//   pg_buffer_t b = d.buffer(stream);
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "procgroup/procgroup.h"

namespace procgroup::nccl_test {

// The core's own element sizes and kinds (pg_common).
using detail::dtype_is_floating;
using detail::dtype_size;

// Host bytes of values in dtype, and back (f16/bf16 through CUDA's host converters).
std::vector<uint8_t> encode(pg_dtype_t dtype, const std::vector<double>& values);
std::vector<double> decode(pg_dtype_t dtype, const std::vector<uint8_t>& bytes);

class DeviceBuffer {
 public:
  DeviceBuffer(pg_dtype_t dtype, size_t count, int device);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void upload(const std::vector<double>& values);
  std::vector<double> download() const;
  pg_buffer_t buffer(cudaStream_t stream = nullptr) const;
  void* data() const { return data_; }

 private:
  pg_dtype_t dtype_;
  size_t count_;
  int device_;
  void* data_ = nullptr;
};

// Groups of `size` ranks on the nccl backend, created on threads over a file store in
// dir; rank r uses cuda:r. Fails the test (and returns none) if any creation fails.
std::vector<pg_group_t> make_groups(int size, const std::string& dir, int64_t timeout_ms = 60000);
// Runs fn(rank) on one thread per rank, each with its device current.
void on_ranks(int size, const std::function<void(int)>& fn);

}  // namespace procgroup::nccl_test
