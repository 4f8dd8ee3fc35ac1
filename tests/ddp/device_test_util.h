// Memory for the ddp tests on either device: host vectors for the CPU, cudaMalloc'ed arrays
// for CUDA, with synchronous uploads and downloads, so one test body runs on both. Built
// with DDP_TEST_HAVE_CUDA when procgroup has CUDA; without it every CUDA request says why.
//
//   if (std::string why = cuda_unavailable(); !why.empty()) GTEST_SKIP() << why;
//   DeviceArray<float> g(device, 100);
//   g.upload(host);  reducer...;  std::vector<float> back = g.download();
#pragma once

#include <cstddef>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "procgroup/ddp/tensor.h"

namespace procgroup::ddp::testing {

// Empty when CUDA device 0 can be used; else "no CUDA device: <cudaGetErrorString>" (or
// "procgroup was built without CUDA").
std::string cuda_unavailable();

// Waits for all work on the device (nothing for the CPU).
void synchronize(Device device);
// Copies memory on `device` to the host once all work on the device is done.
void copy_to_host(Device device, void* host, const void* src, size_t bytes);

// Where a parameterised device test runs: the device and the backend (a name or a path).
struct DeviceCase {
  std::string name;  // "cpu_loopback", "cuda_staging", ...: gtest and ctest select on it
  Device device;
  std::string backend;
  int max_world = 4;  // the nccl plugin: one rank per GPU
};
inline void PrintTo(const DeviceCase& c, std::ostream* os) { *os << c.name; }
// cpu over loopback always; cuda over the staging plugins and the nccl plugin where built.
std::vector<DeviceCase> device_cases();
// A test parameterised by DeviceCase; a CUDA case skips without a device, saying why.
class DeviceTest : public ::testing::TestWithParam<DeviceCase> {
 protected:
  void SetUp() override {
    if (GetParam().device.type != PG_DEVICE_CUDA) return;
    if (std::string why = cuda_unavailable(); !why.empty()) GTEST_SKIP() << why;
  }
  Device device() const { return GetParam().device; }
  const std::string& backend() const { return GetParam().backend; }
};
inline std::string device_case_name(const ::testing::TestParamInfo<DeviceCase>& info) {
  return info.param.name;
}

// Raw bytes on a device; copies are synchronous and complete on return.
class DeviceBytes {
 public:
  DeviceBytes(Device device, size_t bytes);
  ~DeviceBytes();
  DeviceBytes(DeviceBytes&& other) noexcept;
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  DeviceBytes& operator=(DeviceBytes&&) = delete;
  void* data() const { return data_; }
  void upload(const void* host, size_t bytes, size_t offset = 0);
  void download(void* host, size_t bytes, size_t offset = 0) const;

 private:
  Device device_;
  void* data_ = nullptr;
  std::vector<unsigned char> host_;  // the CPU's storage
};

template <class T>
class DeviceArray {
 public:
  DeviceArray(Device device, size_t n) : n_(n), bytes_(device, n * sizeof(T)), device_(device) {}
  DeviceArray(Device device, std::span<const T> values) : DeviceArray(device, values.size()) {
    upload(values);
  }
  std::span<T> span() const { return {static_cast<T*>(bytes_.data()), n_}; }
  TensorRef tensor() const { return TensorRef::of(span(), device_); }
  void upload(std::span<const T> values) { bytes_.upload(values.data(), values.size() * sizeof(T)); }
  std::vector<T> download() const {
    std::vector<T> out(n_);
    bytes_.download(out.data(), n_ * sizeof(T));
    return out;
  }
  size_t size() const { return n_; }

 private:
  size_t n_;
  DeviceBytes bytes_;
  Device device_;
};

// A stream for the tests of one device: NULL on the CPU, a non-blocking stream on CUDA (so
// that work on it is ordered with nothing else unless ddp orders it).
class TestStream {
 public:
  explicit TestStream(Device device);
  ~TestStream();
  TestStream(const TestStream&) = delete;
  TestStream& operator=(const TestStream&) = delete;
  void* get() const { return stream_; }
  void synchronize() const;
  // Asynchronous upload on this stream (host must stay valid until synchronize()).
  void upload_async(void* dst, const void* host, size_t bytes) const;

 private:
  Device device_;
  void* stream_ = nullptr;
};

}  // namespace procgroup::ddp::testing
