// ops.h — where the model's arrays live and what computes on them: the one seam between the
// trainer and a device. CpuOps (OpenBLAS and loops, host memory) and CudaOps (cuBLAS and
// small kernels on the legacy default stream, GPU memory) implement the same operations with
// the same semantics (layers.h), so the MLP, the optimizer and the trainer exist once.
//
// Pointers and spans handed to an Ops point into its device's memory (host memory for the
// CPU); only to_device/to_host cross. Operations are ordered (one stream); results read on
// the host (loss statistics, to_host) are complete when the call returns.
//
// The training group reduces memory of this device only (NCCL takes no host buffers), so
// everything the trainer sends over it is on the Ops' device: parameters, buffers and
// SyncBatchNorm (make_batch_norm), and host values through allreduce_values.
//
//   const Ops& ops = cpu_ops();                       // or *make_ops("cuda", local_rank)
//   DeviceArray w(ops, 784 * 512);
//   ops.to_device(w.data(), host.data(), w.bytes());
//   ops.linear_forward(x, n, 784, w.data(), nullptr, 512, y);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "layers.h"
#include "procgroup/ddp/tensor.h"
#include "procgroup/procgroup.hpp"

namespace fashion_mnist {

class Ops {
 public:
  virtual ~Ops() = default;
  // ddp's description of the memory (Parameter, TensorRef) and a line for the log.
  virtual procgroup::ddp::Device device() const = 0;
  virtual std::string describe() const = 0;

  // Zeroed memory; release(nullptr) is a no-op.
  virtual void* allocate(size_t bytes) const = 0;
  virtual void release(void* p) const noexcept = 0;
  virtual void to_device(void* dst, const void* host_src, size_t bytes) const = 0;
  virtual void to_host(void* host_dst, const void* src, size_t bytes) const = 0;
  virtual void fill(std::span<float> x, float value) const = 0;
  virtual void add(std::span<float> dst, std::span<const float> src) const = 0;  // dst += src
  // Waits for everything issued so far (for timing); a no-op on the CPU.
  virtual void synchronize() const = 0;

  // As the functions of the same names in layers.h.
  virtual void linear_forward(const float* x, int n, int in, const float* w, const float* b,
                              int out, float* y) const = 0;
  virtual void linear_backward_weight(const float* x, const float* dy, int n, int in, int out,
                                      float* dw, float* db) const = 0;
  virtual void linear_backward_input(const float* dy, const float* w, int n, int in, int out,
                                     float* dx) const = 0;
  virtual void relu_forward(std::span<float> x) const = 0;
  virtual void relu_backward(std::span<const float> y, std::span<float> dy) const = 0;
  // labels on the device; the sums come back to the host.
  virtual LossStats softmax_cross_entropy(const float* logits, const uint8_t* labels, int n,
                                          int classes, float scale, float* dlogits) const = 0;
  // One SGD step on one parameter (sgd.h): d = g + decay * w; v = first ? d : momentum * v + d;
  // w -= lr * v.
  virtual void sgd_update(std::span<float> w, std::span<const float> g, std::span<float> v,
                          float lr, float momentum, float decay, bool first) const = 0;
  // Batch norm over this device's memory: per rank (sync_group null: local_batch_norm) or
  // make_sync_batch_norm over sync_group, which must outlive it.
  std::unique_ptr<BatchNorm> make_batch_norm(int channels,
                                             const procgroup::Group* sync_group) const;
  // Per-rank statistics, computed as layers.cc's LocalBatchNorm does.
  virtual std::unique_ptr<BatchNorm> local_batch_norm(int channels) const = 0;
};

// The CPU implementation (stateless, shared).
const Ops& cpu_ops();

// Statistics over the global batch (every rank's rows): ddp::SyncBatchNorm on ops' device,
// working on that device's memory directly; its gradients accumulate like every layer's.
// Forward and backward in training are collective on group (which must reduce buffers of
// ops' device and outlive the layer).
std::unique_ptr<BatchNorm> make_sync_batch_norm(const procgroup::Group& group, int channels,
                                                const Ops& ops = cpu_ops());

// Reduces host values over group in place, through a buffer on ops' device (the group's
// backend may take no host memory): copied there, reduced on the legacy default stream,
// waited for, copied back. Host memory on the CPU. Collective; complete on return.
void allreduce_values(const procgroup::Group& group, const Ops& ops, std::span<double> values,
                      procgroup::ReduceOp op = procgroup::ReduceOp::kSum);

// "cpu" or "cuda". For CUDA: the device local_rank % device count (PROCGROUP_NCCL_DEVICE
// when set, the nccl plugin's choice), made current; throws
// std::runtime_error saying "no CUDA device" (with CUDA's reason) when there is none, that
// more ranks share this node than it has devices (NCCL takes one device per rank), or that
// the program was built without CUDA.
std::unique_ptr<Ops> make_ops(const std::string& device, int local_rank, int local_world_size);

// Owned memory for n elements of T on an Ops' device (move-only).
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const Ops& ops, size_t n)
      : ops_(&ops), data_(static_cast<T*>(ops.allocate(n * sizeof(T)))), size_(n) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ops_(o.ops_), data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ops_ = o.ops_;
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }

  T* data() const { return data_; }
  size_t size() const { return size_; }
  size_t bytes() const { return size_ * sizeof(T); }
  std::span<T> span() const { return {data_, size_}; }
  std::span<T> first(size_t n) const { return span().first(n); }
  // At least n elements (the contents are lost when it grows).
  void reserve(const Ops& ops, size_t n) {
    if (n > size_ || ops_ != &ops) *this = DeviceBuffer(ops, n);
  }

 private:
  void reset() {
    if (ops_ != nullptr) ops_->release(data_);
    data_ = nullptr;
    size_ = 0;
  }
  const Ops* ops_ = nullptr;
  T* data_ = nullptr;
  size_t size_ = 0;
};
using DeviceArray = DeviceBuffer<float>;

}  // namespace fashion_mnist
