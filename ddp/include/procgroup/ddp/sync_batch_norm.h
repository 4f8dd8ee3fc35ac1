// sync_batch_norm.h — batch normalisation whose batch statistics span all ranks.
//
// Input is n x C x spatial floats (NCHW with spatial = H*W; 1 for N x C). In training, each
// rank computes its per-channel mean, invstd and count, the ranks allgather them (counts
// may differ, including zero), and every rank combines them into the global mean and
// biased variance (Chan's parallel combination), normalises, and updates the running
// statistics with the unbiased global variance. Eval uses the running statistics, with no
// communication. Backward allreduces sum(dy) and sum(dy * (x - mean)) per channel.
//
//   ddp::SyncBatchNorm bn(group, channels);
//   bn.forward(x, n, h * w, y);                                   // collective in training
//   bn.backward(x, dy, dx, grad_weight, grad_bias);               // collective in training
//
// As in PyTorch, grad_weight and grad_bias are this rank's contributions (register weight
// and bias with the Reducer, which averages them like every other gradient); grad_input is
// final. Forward and backward are collective: every rank calls them, even with n == 0.
//
// CUDA: SyncBatchNormOptions{.device = {PG_DEVICE_CUDA, local_rank}, .cuda_stream = s}.
// Then x, y, dy, dx, the gradients and the spans weight() ... running_var() are device
// memory; the kernels run on cuda_stream and the collectives are ordered after it. forward
// in training waits for its statistics exchange (the host checks the global count), the
// rest is asynchronous in stream order. Statistics travel in double as on the CPU, with
// the same exchange layout and the same combination code, so the devices agree closely.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "procgroup/ddp/tensor.h"
#include "procgroup/procgroup.hpp"

namespace procgroup::ddp {

struct SyncBatchNormOptions {
  double eps = 1e-5;
  double momentum = 0.1;  // running = (1 - momentum) * running + momentum * batch
  bool affine = true;     // false: weight 1 and bias 0, no gradients
  bool track_running_stats = true;
  Device device{};                // where parameters, buffers and inputs live
  void* cuda_stream = nullptr;    // cudaStream_t for CUDA; NULL: the legacy default stream
};

class SyncBatchNorm {
 public:
  // CUDA without CUDA (build or device): ddp::Error(PG_ERR_UNSUPPORTED).
  SyncBatchNorm(const Group& group, int64_t channels, SyncBatchNormOptions options = {});
  ~SyncBatchNorm();
  SyncBatchNorm(SyncBatchNorm&&) noexcept;
  SyncBatchNorm& operator=(SyncBatchNorm&&) noexcept;

  // Parameters (weight 1, bias 0 at start) and buffers (mean 0, var 1 at start), on
  // options.device.
  std::span<float> weight() { return slice(0); }
  std::span<float> bias() { return slice(1); }
  std::span<float> running_mean() { return slice(2); }
  std::span<float> running_var() { return slice(3); }
  int64_t num_batches_tracked() const { return num_batches_tracked_; }
  int64_t channels() const { return channels_; }
  Device device() const { return options_.device; }

  void train(bool on = true) { training_ = on; }
  void eval() { training_ = false; }
  bool training() const { return training_; }

  // y = (x - mean) * invstd * weight + bias; x and y hold n * channels * spatial floats.
  // Throws ddp::Error on every rank when the ranks together hold at most one value per
  // channel in training.
  void forward(std::span<const float> x, int64_t n, int64_t spatial, std::span<float> y);
  // For the last forward: pass the same x. grad_weight/grad_bias may be empty to skip them.
  void backward(std::span<const float> x, std::span<const float> dy, std::span<float> dx,
                std::span<float> grad_weight, std::span<float> grad_bias);

 private:
  struct State;  // device memory: parameters, buffers, statistics, exchange scratch
  bool uses_batch_stats() const { return training_ || !options_.track_running_stats; }
  void check_sizes(size_t x, size_t other, const char* what) const;
  std::span<float> slice(int k);
  void batch_statistics(const float* x, int64_t n, int64_t spatial);

  const Group* group_;
  int64_t channels_;
  SyncBatchNormOptions options_;
  bool training_ = true;
  std::unique_ptr<State> state_;
  int64_t num_batches_tracked_ = 0;
  // Saved by forward for backward (mean and invstd are in the State).
  int64_t n_ = 0, spatial_ = 0;
  bool saved_batch_stats_ = false;
  double total_count_ = 0;
};

}  // namespace procgroup::ddp
