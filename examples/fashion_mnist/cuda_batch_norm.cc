// Per-rank batch norm on the GPU (see cuda_ops.h): cuda_kernels.cu's batch-norm kernels, which
// follow layers.cc's LocalBatchNorm. (ddp::SyncBatchNorm, the synchronised one, needs a group
// and a statistics exchange per forward; per-rank statistics need neither.)
#include <cstddef>

#include "cuda_kernels.h"
#include "cuda_ops.h"

namespace fashion_mnist {
namespace {

constexpr double kEps = 1e-5;  // as LocalBatchNorm's
constexpr double kMomentum = 0.1;

// weight 1, bias 0, running mean 0, running variance 1: BatchNorm1d's start.
struct BatchNormArrays {
  BatchNormArrays(const Ops& ops, int channels)
      : weight(ops, channels), bias(ops, channels), mean(ops, channels), var(ops, channels) {
    ops.fill(weight.span(), 1.0f);
    ops.fill(var.span(), 1.0f);
  }
  DeviceArray weight, bias, mean, var;
};

class CudaLocalBatchNorm final : public BatchNorm {
 public:
  CudaLocalBatchNorm(const Ops& ops, int channels)
      : c_(channels),
        a_(ops, channels),
        mean_(ops, channels),
        invstd_(ops, channels),
        scratch_(ops, 3 * static_cast<size_t>(channels)) {}

  void forward(std::span<const float> x, int n, std::span<float> y) override {
    n_ = n;
    check_cuda(cuda::launch_batch_norm_forward(
                   x.data(), n, c_, training_, kEps, kMomentum, a_.weight.data(), a_.bias.data(),
                   a_.mean.data(), a_.var.data(), mean_.data(), invstd_.data(), y.data()),
               "batch norm forward kernels");
  }
  void backward(std::span<const float> x, std::span<const float> dy, std::span<float> dx,
                std::span<float> grad_weight, std::span<float> grad_bias) override {
    check_cuda(
        cuda::launch_batch_norm_backward(x.data(), dy.data(), n_, c_, training_, mean_.data(),
                                         invstd_.data(), a_.weight.data(), dx.data(),
                                         grad_weight.data(), grad_bias.data(), scratch_.data()),
        "batch norm backward kernels");
  }
  void train(bool on) override { training_ = on; }
  std::span<float> weight() override { return a_.weight.span(); }
  std::span<float> bias() override { return a_.bias.span(); }
  std::span<float> running_mean() override { return a_.mean.span(); }
  std::span<float> running_var() override { return a_.var.span(); }

 private:
  int c_;
  bool training_ = true;
  int n_ = 0;
  BatchNormArrays a_;
  DeviceBuffer<double> mean_, invstd_, scratch_;
};

}  // namespace

std::unique_ptr<BatchNorm> make_cuda_local_batch_norm(const Ops& ops, int channels) {
  return std::make_unique<CudaLocalBatchNorm>(ops, channels);
}

}  // namespace fashion_mnist
