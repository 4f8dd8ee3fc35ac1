// layers.h — the MLP's building blocks on row-major float arrays: a fully connected layer
// whose matrix products go to CBLAS (OpenBLAS), ReLU, softmax cross-entropy, and the batch
// normalisation interface with its per-rank CPU implementation (the global one, on any
// device, is ddp::SyncBatchNorm: make_sync_batch_norm in ops.h).
//
// Gradients accumulate (+=) like autograd's .grad and the ddp Reducer's storage, so the
// caller zeroes them between steps (Reducer::zero_grad()).
//
//   linear_forward(x, n, in, w, nullptr, out, y);          // y = x w^T (+ b)
//   linear_backward_weight(x, dy, n, in, out, dw, db);      // dw += dy^T x, db += sum(dy)
//   linear_backward_input(dy, w, n, in, out, dx);           // dx = dy w
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace fashion_mnist {

// x: n x in, w: out x in (PyTorch's layout), b: out or null, y: n x out.
void linear_forward(const float* x, int n, int in, const float* w, const float* b, int out,
                    float* y);
// dw += dy^T x (out x in); db += column sums of dy when db is not null.
void linear_backward_weight(const float* x, const float* dy, int n, int in, int out, float* dw,
                            float* db);
// dx = dy w (n x in), overwritten.
void linear_backward_input(const float* dy, const float* w, int n, int in, int out, float* dx);

void relu_forward(std::span<float> x);  // in place
// dy *= (y > 0), in place, y being the ReLU's output.
void relu_backward(std::span<const float> y, std::span<float> dy);

struct LossStats {
  double loss_sum = 0;  // sum over the rows of -log softmax(logits)[label]
  int64_t correct = 0;  // rows whose arg max is the label
};
// Softmax cross-entropy over n rows of `classes` logits. When dlogits is not null it
// receives scale * d(sum of losses)/d(logits), i.e. scale = 1/n for the mean loss.
LossStats softmax_cross_entropy(const float* logits, const uint8_t* labels, int n, int classes,
                                float scale, float* dlogits);

// Batch normalisation over n x channels rows (BatchNorm1d). Training forward uses the batch
// statistics and updates the running ones (momentum 0.1, unbiased variance); eval uses the
// running statistics.
class BatchNorm {
 public:
  virtual ~BatchNorm() = default;
  virtual void forward(std::span<const float> x, int n, std::span<float> y) = 0;
  // For the last forward's x; dx is overwritten, grad_weight and grad_bias accumulate.
  virtual void backward(std::span<const float> x, std::span<const float> dy, std::span<float> dx,
                        std::span<float> grad_weight, std::span<float> grad_bias) = 0;
  virtual void train(bool on) = 0;
  virtual std::span<float> weight() = 0;
  virtual std::span<float> bias() = 0;
  virtual std::span<float> running_mean() = 0;
  virtual std::span<float> running_var() = 0;
};

// The batch's statistics are this rank's alone (what plain nn.BatchNorm1d does under DDP).
std::unique_ptr<BatchNorm> make_local_batch_norm(int channels);

}  // namespace fashion_mnist
