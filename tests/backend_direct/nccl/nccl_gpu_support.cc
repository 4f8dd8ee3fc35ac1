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

double input_value(int rank, uint64_t i) { return static_cast<double>((rank * 7 + i * 3) % 3 + 1); }

Expected expected(pg_op_t op, pg_dtype_t dtype, pg_reduce_op_t redop, int root, int rank, int size,
                  uint64_t n) {
  auto reduce = [&](uint64_t i) {  // over ranks, of element i of each input
    double acc = input_value(0, i);
    for (int r = 1; r < size; ++r) {
      const double v = input_value(r, i);
      switch (redop) {
        case PG_REDUCE_PROD: acc *= v; break;
        case PG_REDUCE_MIN: acc = std::min(acc, v); break;
        case PG_REDUCE_MAX: acc = std::max(acc, v); break;
        default: acc += v; break;
      }
    }
    if (redop == PG_REDUCE_AVG) acc = dtype_is_floating(dtype) ? acc / size : std::trunc(acc / size);
    return acc;
  };
  Expected e;
  // NCCL's avg multiplies by 1/size first: inexact only for sizes that are not powers of 2.
  if (redop == PG_REDUCE_AVG && dtype_is_floating(dtype) && (size & (size - 1)) != 0) e.tolerance = 0.02;
  const uint64_t world = static_cast<uint64_t>(size);
  switch (op) {
    case PG_OP_ALLREDUCE:
      for (uint64_t i = 0; i < n; ++i) e.values.push_back(reduce(i));
      break;
    case PG_OP_REDUCE:
      if (rank == root)
        for (uint64_t i = 0; i < n; ++i) e.values.push_back(reduce(i));
      break;
    case PG_OP_BROADCAST:
      for (uint64_t i = 0; i < n; ++i) e.values.push_back(input_value(root, i));
      break;
    case PG_OP_ALLGATHER:
    case PG_OP_GATHER:
      if (op == PG_OP_GATHER && rank != root) break;
      for (uint64_t j = 0; j < world; ++j)
        for (uint64_t i = 0; i < n; ++i) e.values.push_back(input_value(static_cast<int>(j), i));
      break;
    case PG_OP_REDUCE_SCATTER:
      for (uint64_t i = 0; i < n; ++i) e.values.push_back(reduce(rank * n + i));
      break;
    case PG_OP_SCATTER:
      for (uint64_t i = 0; i < n; ++i) e.values.push_back(input_value(root, rank * n + i));
      break;
    case PG_OP_ALLTOALL:
      for (uint64_t j = 0; j < world; ++j)
        for (uint64_t i = 0; i < n; ++i)
          e.values.push_back(input_value(static_cast<int>(j), rank * n + i));
      break;
    default: break;
  }
  return e;
}

}  // namespace procgroup::nccl_test
