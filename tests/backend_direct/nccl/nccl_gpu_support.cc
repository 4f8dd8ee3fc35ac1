// Staging, groups on threads and the host reference for the GPU tests (nccl_gpu_support.h).
#include "nccl_gpu_support.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>

namespace procgroup::nccl_test {

template <class T>
void put(uint8_t* at, T v) {
  std::memcpy(at, &v, sizeof(T));
}
template <class T>
T get(const uint8_t* at) {
  T v;
  std::memcpy(&v, at, sizeof(T));
  return v;
}

std::vector<uint8_t> encode(pg_dtype_t dtype, const std::vector<double>& values) {
  const size_t es = dtype_size(dtype);
  std::vector<uint8_t> out(values.size() * es);
  for (size_t i = 0; i < values.size(); ++i) {
    uint8_t* at = out.data() + i * es;
    const double v = values[i];
    switch (dtype) {
      case PG_DTYPE_F32: put(at, static_cast<float>(v)); break;
      case PG_DTYPE_F64: put(at, v); break;
      case PG_DTYPE_F16: put(at, __float2half(static_cast<float>(v))); break;
      case PG_DTYPE_BF16: put(at, __float2bfloat16(static_cast<float>(v))); break;
      case PG_DTYPE_I8: put(at, static_cast<int8_t>(v)); break;
      case PG_DTYPE_U8: put(at, static_cast<uint8_t>(v)); break;
      case PG_DTYPE_I32: put(at, static_cast<int32_t>(v)); break;
      default: put(at, static_cast<int64_t>(v)); break;
    }
  }
  return out;
}

std::vector<double> decode(pg_dtype_t dtype, const std::vector<uint8_t>& bytes) {
  const size_t es = dtype_size(dtype);
  std::vector<double> out(bytes.size() / es);
  for (size_t i = 0; i < out.size(); ++i) {
    const uint8_t* at = bytes.data() + i * es;
    switch (dtype) {
      case PG_DTYPE_F32: out[i] = get<float>(at); break;
      case PG_DTYPE_F64: out[i] = get<double>(at); break;
      case PG_DTYPE_F16: out[i] = __half2float(get<__half>(at)); break;
      case PG_DTYPE_BF16: out[i] = __bfloat162float(get<__nv_bfloat16>(at)); break;
      case PG_DTYPE_I8: out[i] = get<int8_t>(at); break;
      case PG_DTYPE_U8: out[i] = get<uint8_t>(at); break;
      case PG_DTYPE_I32: out[i] = get<int32_t>(at); break;
      default: out[i] = static_cast<double>(get<int64_t>(at)); break;
    }
  }
  return out;
}

DeviceBuffer::DeviceBuffer(pg_dtype_t dtype, size_t count, int device)
    : dtype_(dtype), count_(count), device_(device) {
  EXPECT_EQ(cudaSetDevice(device), cudaSuccess);
  // One spare element keeps a 0-element buffer a real device pointer.
  EXPECT_EQ(cudaMalloc(&data_, (count + 1) * dtype_size(dtype)), cudaSuccess);
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) (void)cudaFree(data_);
}

void DeviceBuffer::upload(const std::vector<double>& values) {
  const std::vector<uint8_t> bytes = encode(dtype_, values);
  EXPECT_EQ(cudaMemcpy(data_, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
}

std::vector<double> DeviceBuffer::download() const {
  std::vector<uint8_t> bytes(count_ * dtype_size(dtype_));
  EXPECT_EQ(cudaMemcpy(bytes.data(), data_, bytes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  return decode(dtype_, bytes);
}

pg_buffer_t DeviceBuffer::buffer(cudaStream_t stream) const {
  pg_buffer_t b = PG_BUFFER_INIT;
  b.dtype = dtype_;
  b.data = data_;
  b.count = count_;
  b.device_type = PG_DEVICE_CUDA;
  b.device_index = device_;
  b.stream = stream;
  return b;
}

void on_ranks(int size, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&fn, r] {
      (void)cudaSetDevice(r);
      fn(r);
    });
  }
  for (auto& t : threads) t.join();
}

std::vector<pg_group_t> make_groups(int size, const std::string& dir, int64_t timeout_ms) {
  std::vector<pg_group_t> groups(size, nullptr);
  std::vector<std::string> errors(size);
  const std::string store = "file://" + dir + "/store";
  on_ranks(size, [&](int r) {
    pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
    o.rank = r;
    o.size = size;
    o.local_rank = r;
    o.local_size = size;
    o.backend = "nccl";
    o.store_url = store.c_str();
    o.timeout_ms = timeout_ms;
    if (pg_group_create(&o, &groups[r]) != PG_OK) errors[r] = pg_last_error();
  });
  for (int r = 0; r < size; ++r) {
    if (errors[r].empty()) continue;
    ADD_FAILURE() << "rank " << r << ": pg_group_create: " << errors[r];
    for (pg_group_t g : groups)
      if (g != nullptr) pg_group_destroy(g);
    return {};
  }
  return groups;
}

}  // namespace procgroup::nccl_test
