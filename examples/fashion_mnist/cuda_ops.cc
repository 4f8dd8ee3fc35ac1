// The CUDA Ops (see cuda_ops.h): device selection, memory, cuBLAS, kernel launches. Every
// CUDA and cuBLAS status is checked and turned into a message naming the call.
#include "cuda_ops.h"

#include <cublas_v2.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_kernels.h"

namespace fashion_mnist {

void check_cuda(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  throw std::runtime_error(std::string("CUDA error in ") + what + ": " +
                           cudaGetErrorString(status) + " (" + cudaGetErrorName(status) + ")");
}

namespace {

void check_cublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw std::runtime_error(std::string("cuBLAS error in ") + what + ": " +
                           cublasGetStatusString(status));
}

// The cuBLAS handle, bound to the current device and the legacy default stream.
class Cublas {
 public:
  Cublas() {
    check_cublas(cublasCreate(&handle_), "cublasCreate");
    // Plain FP32 (no TF32 tensor cores): CUDA and CPU runs then differ by summation order only.
    check_cublas(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    check_cublas(cublasSetStream(handle_, cudaStreamLegacy), "cublasSetStream");
  }
  ~Cublas() { cublasDestroy(handle_); }
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

class CudaOps final : public Ops {
 public:
  CudaOps(int device, std::string name) : device_(device), name_(std::move(name)) {}

  procgroup::ddp::Device device() const override { return {PG_DEVICE_CUDA, device_}; }
  std::string describe() const override {
    return "cuda:" + std::to_string(device_) + " (" + name_ + ", cuBLAS)";
  }

  void* allocate(size_t bytes) const override {
    void* p = nullptr;
    check_cuda(cudaMalloc(&p, bytes == 0 ? 1 : bytes), "cudaMalloc");
    const cudaError_t zeroed = cudaMemset(p, 0, bytes);
    if (zeroed != cudaSuccess) cudaFree(p);
    check_cuda(zeroed, "cudaMemset");
    return p;
  }
  void release(void* p) const noexcept override {
    if (p != nullptr) cudaFree(p);  // nothing to do about a failure while freeing
  }
  void to_device(void* dst, const void* src, size_t bytes) const override {
    if (bytes > 0) check_cuda(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "copy to GPU");
  }
  void to_host(void* dst, const void* src, size_t bytes) const override {
    if (bytes > 0) check_cuda(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "copy to host");
  }
  void fill(std::span<float> x, float value) const override {
    check_cuda(cuda::launch_fill(x.data(), x.size(), value), "fill kernel");
  }
  void add(std::span<float> dst, std::span<const float> src) const override {
    check_cuda(cuda::launch_add(dst.data(), src.data(), dst.size()), "add kernel");
  }
  // The legacy stream only: gradient reductions in flight on the backend's streams go on.
  void synchronize() const override {
    check_cuda(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize");
  }

  // Row-major A (r x c) is column-major A^T, so y = x w^T becomes y^T = w x^T: cuBLAS sees
  // w as (in x out) column-major and takes its transpose.
  void linear_forward(const float* x, int n, int in, const float* w, const float* b, int out,
                      float* y) const override {
    if (n == 0) return;
    const float one = 1.0f, zero = 0.0f;
    check_cublas(cublasSgemm(cublas_.get(), CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &one, w, in, x,
                             in, &zero, y, out),
                 "sgemm (linear forward)");
    if (b != nullptr) check_cuda(cuda::launch_add_bias(y, b, n, out), "bias kernel");
  }
  // dw^T (in x out) += x^T (in x n) . dy (n x out), in column-major terms.
  void linear_backward_weight(const float* x, const float* dy, int n, int in, int out, float* dw,
                              float* db) const override {
    if (n == 0) return;
    const float one = 1.0f;
    check_cublas(cublasSgemm(cublas_.get(), CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, &one, x, in, dy,
                             out, &one, dw, in),
                 "sgemm (weight gradient)");
    if (db != nullptr) check_cuda(cuda::launch_column_sums(dy, n, out, db), "bias gradient kernel");
  }
  // dx^T (in x n) = w^T (in x out) . dy^T (out x n).
  void linear_backward_input(const float* dy, const float* w, int n, int in, int out,
                             float* dx) const override {
    if (n == 0) return;
    const float one = 1.0f, zero = 0.0f;
    check_cublas(cublasSgemm(cublas_.get(), CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, &one, w, in, dy,
                             out, &zero, dx, in),
                 "sgemm (input gradient)");
  }
  void relu_forward(std::span<float> x) const override {
    check_cuda(cuda::launch_relu_forward(x.data(), x.size()), "relu kernel");
  }
  void relu_backward(std::span<const float> y, std::span<float> dy) const override {
    check_cuda(cuda::launch_relu_backward(y.data(), dy.data(), dy.size()), "relu backward kernel");
  }

  // Per-row results come back to the host and are summed in row order, as on the CPU.
  LossStats softmax_cross_entropy(const float* logits, const uint8_t* labels, int n, int classes,
                                  float scale, float* dlogits) const override {
    LossStats s;
    if (n == 0) return s;
    row_loss_.reserve(*this, static_cast<size_t>(n));
    row_correct_.reserve(*this, static_cast<size_t>(n));
    check_cuda(cuda::launch_softmax_cross_entropy(logits, labels, n, classes, scale, dlogits,
                                                  row_loss_.data(), row_correct_.data()),
               "softmax cross-entropy kernel");
    std::vector<double> loss(n);
    std::vector<int32_t> correct(n);
    to_host(loss.data(), row_loss_.data(), loss.size() * sizeof(double));
    to_host(correct.data(), row_correct_.data(), correct.size() * sizeof(int32_t));
    for (int i = 0; i < n; ++i) {
      s.loss_sum += loss[i];
      s.correct += correct[i];
    }
    return s;
  }

  void sgd_update(std::span<float> w, std::span<const float> g, std::span<float> v, float lr,
                  float momentum, float decay, bool first) const override {
    check_cuda(
        cuda::launch_sgd_update(w.data(), g.data(), v.data(), w.size(), lr, momentum, decay, first),
        "SGD kernel");
  }

  std::unique_ptr<BatchNorm> local_batch_norm(int channels) const override {
    return make_cuda_local_batch_norm(*this, channels);
  }

 private:
  int device_;
  std::string name_;
  Cublas cublas_;
  // Scratch for the per-row losses, grown on demand (the only state a const call changes).
  mutable DeviceBuffer<double> row_loss_;
  mutable DeviceBuffer<int32_t> row_correct_;
};

}  // namespace

std::unique_ptr<Ops> make_cuda_ops(int local_rank, int local_world_size) {
  int count = 0;
  const cudaError_t found = cudaGetDeviceCount(&count);
  if (found != cudaSuccess) {
    throw std::runtime_error(std::string("--device cuda: no CUDA device: ") +
                             cudaGetErrorString(found) +
                             " (cudaGetDeviceCount: " + cudaGetErrorName(found) + ")");
  }
  if (count <= 0) {
    throw std::runtime_error("--device cuda: no CUDA device: cudaGetDeviceCount found none");
  }
  // The nccl plugin puts this rank's communicator on PROCGROUP_NCCL_DEVICE when it is set
  // (else on LOCAL_RANK), and refuses buffers of any other device: take the same one.
  int device = (local_rank < 0 ? 0 : local_rank) % count;
  if (const char* env = std::getenv("PROCGROUP_NCCL_DEVICE"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (*end != '\0' || v < 0 || v >= count) {
      throw std::runtime_error("--device cuda: PROCGROUP_NCCL_DEVICE='" + std::string(env) +
                               "' is not a device index below " + std::to_string(count));
    }
    device = static_cast<int>(v);
  } else if (local_world_size > count) {
    // NCCL refuses two ranks on one GPU: say so here rather than fail inside the group.
    throw std::runtime_error("--device cuda: " + std::to_string(local_world_size) +
                             " ranks on this node but " + std::to_string(count) +
                             " CUDA device(s); NCCL needs a device of its own for every rank "
                             "(with one GPU, run one rank)");
  }
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  return std::make_unique<CudaOps>(device, prop.name);
}

}  // namespace fashion_mnist
