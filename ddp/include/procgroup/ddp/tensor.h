// tensor.h — the views ddp works on: raw contiguous memory described by element count,
// dtype and device, and a named trainable parameter (values plus gradient).
//
// ddp owns no tensor library: the training code keeps its own arrays and hands ddp views.
//
//   std::vector<float> w(1024), gw(1024);
//   ddp::Parameter p = ddp::Parameter::of("fc.weight", std::span(w), std::span(gw));
//   ddp::TensorRef buf = ddp::TensorRef::of(std::span(running_mean));
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

#include "procgroup/ddp/error.h"
#include "procgroup/procgroup.hpp"

namespace procgroup::ddp {

// Where memory lives: host memory (PG_DEVICE_CPU) or memory on CUDA device `index`
// (PG_DEVICE_CUDA; each rank names its own GPU, usually its local rank). A build without
// CUDA rejects CUDA tensors with PG_ERR_UNSUPPORTED "procgroup was built without CUDA".
struct Device {
  pg_device_type_t type = PG_DEVICE_CPU;
  int32_t index = 0;
  friend bool operator==(const Device&, const Device&) = default;
};

// Bytes per element (0 for an invalid dtype) and the dtype's short name ("f32", ...).
size_t element_size(pg_dtype_t dtype);
const char* dtype_name(pg_dtype_t dtype);
// f32, f64, f16 and bf16: the dtypes gradients may have.
bool is_floating(pg_dtype_t dtype);

// A non-owning view of numel contiguous elements.
struct TensorRef {
  void* data = nullptr;
  uint64_t numel = 0;
  pg_dtype_t dtype = PG_DTYPE_F32;
  Device device{};

  template <class T>
  static TensorRef of(std::span<T> s, Device device = {}) {
    return {const_cast<std::remove_cv_t<T>*>(s.data()), s.size(), dtype_of<T>(), device};
  }
  size_t bytes() const { return numel * element_size(dtype); }
  // For a collective on this tensor; stream (a cudaStream_t, NULL: the legacy default
  // stream) orders the collective after the work already enqueued there.
  pg_buffer_t buffer(void* stream = nullptr) const {
    pg_buffer_t b = pg_buffer_cpu(data, numel, dtype);
    b.device_type = device.type;
    b.device_index = device.index;
    b.stream = stream;
    return b;
  }
};

// A trainable parameter. data holds its values (broadcast, checkpoints); grad is where
// backward accumulates its gradient (ignored, and may be null, when the Reducer runs with
// gradient_as_bucket_view: the Reducer then owns the gradient storage).
struct Parameter {
  std::string name;
  void* data = nullptr;
  void* grad = nullptr;
  uint64_t numel = 0;
  pg_dtype_t dtype = PG_DTYPE_F32;
  Device device{};

  template <class T>
  static Parameter of(std::string name, std::span<T> data, std::span<T> grad = {},
                      Device device = {}) {
    if (!grad.empty() && grad.size() != data.size()) {
      throw Error(PG_ERR_INVALID_ARGUMENT, "parameter '" + name + "': gradient has " +
                                               std::to_string(grad.size()) + " elements, values " +
                                               std::to_string(data.size()));
    }
    return {std::move(name), data.data(), grad.data(), data.size(), dtype_of<T>(), device};
  }
  TensorRef values() const { return {data, numel, dtype, device}; }
  size_t bytes() const { return numel * element_size(dtype); }
};

}  // namespace procgroup::ddp
