// The CPU Ops (host memory, layers.cc's OpenBLAS and loops) and make_ops(), which picks it or
// the CUDA one (cuda_ops.h) for --device.
#include <cblas.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#include "ops.h"
#ifdef PROCGROUP_HAVE_CUDA
#include "cuda_ops.h"
#endif

namespace fashion_mnist {
namespace {

class CpuOps final : public Ops {
 public:
  procgroup::ddp::Device device() const override { return {}; }
  std::string describe() const override {
    return std::string("cpu (OpenBLAS ") + openblas_get_corename() + ", " +
           std::to_string(openblas_get_num_threads()) + " thread(s) per rank)";
  }

  void* allocate(size_t bytes) const override {
    void* p = std::calloc(bytes == 0 ? 1 : bytes, 1);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  void release(void* p) const noexcept override { std::free(p); }
  void to_device(void* dst, const void* src, size_t bytes) const override {
    if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
  }
  void to_host(void* dst, const void* src, size_t bytes) const override {
    if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
  }
  void fill(std::span<float> x, float value) const override {
    for (float& v : x) v = value;
  }
  void add(std::span<float> dst, std::span<const float> src) const override {
    for (size_t j = 0; j < dst.size(); ++j) dst[j] += src[j];
  }
  void synchronize() const override {}

  void linear_forward(const float* x, int n, int in, const float* w, const float* b, int out,
                      float* y) const override {
    fashion_mnist::linear_forward(x, n, in, w, b, out, y);
  }
  void linear_backward_weight(const float* x, const float* dy, int n, int in, int out, float* dw,
                              float* db) const override {
    fashion_mnist::linear_backward_weight(x, dy, n, in, out, dw, db);
  }
  void linear_backward_input(const float* dy, const float* w, int n, int in, int out,
                             float* dx) const override {
    fashion_mnist::linear_backward_input(dy, w, n, in, out, dx);
  }
  void relu_forward(std::span<float> x) const override { fashion_mnist::relu_forward(x); }
  void relu_backward(std::span<const float> y, std::span<float> dy) const override {
    fashion_mnist::relu_backward(y, dy);
  }
  LossStats softmax_cross_entropy(const float* logits, const uint8_t* labels, int n, int classes,
                                  float scale, float* dlogits) const override {
    return fashion_mnist::softmax_cross_entropy(logits, labels, n, classes, scale, dlogits);
  }
  void sgd_update(std::span<float> w, std::span<const float> g, std::span<float> v, float lr,
                  float momentum, float decay, bool first) const override {
    for (size_t j = 0; j < w.size(); ++j) {
      const float d = g[j] + decay * w[j];
      v[j] = first ? d : momentum * v[j] + d;
      w[j] -= lr * v[j];
    }
  }
  std::unique_ptr<BatchNorm> local_batch_norm(int channels) const override {
    return make_local_batch_norm(channels);
  }
};

}  // namespace

const Ops& cpu_ops() {
  static const CpuOps ops;  // stateless
  return ops;
}

std::unique_ptr<Ops> make_ops(const std::string& device, int local_rank, int local_world_size) {
  if (device == "cpu") return std::make_unique<CpuOps>();
  if (device != "cuda") throw std::invalid_argument("unknown device '" + device + "' (cpu, cuda)");
#ifdef PROCGROUP_HAVE_CUDA
  return make_cuda_ops(local_rank, local_world_size);
#else
  (void)local_rank;
  (void)local_world_size;
  throw std::runtime_error(
      "--device cuda: this fashion_mnist was built without CUDA (no CUDA toolkit and NCCL "
      "found at configure time, or PROCGROUP_WITH_NCCL=OFF); rebuild on a machine with them");
#endif
}

}  // namespace fashion_mnist
