// The device-independent part of ops.h: choosing the batch norm, the SyncBatchNorm layer and
// reductions of host values. Each works on any Ops through its operations and its device, so
// the CPU and CUDA runs take the same path.
#include "ops.h"

#include <memory>

#include "procgroup/ddp/sync_batch_norm.h"

namespace fashion_mnist {
namespace {

procgroup::ddp::SyncBatchNormOptions on_device(const Ops& ops) {
  procgroup::ddp::SyncBatchNormOptions o;
  o.device = ops.device();
  o.cuda_stream = nullptr;  // the legacy default stream, where the Ops issues its work
  return o;
}

// ddp::SyncBatchNorm on the Ops' device. It assigns its weight and bias gradients; ours
// accumulate, through the Ops' add.
class SyncBatchNormLayer final : public BatchNorm {
 public:
  SyncBatchNormLayer(const procgroup::Group& group, int channels, const Ops& ops)
      : ops_(ops), bn_(group, channels, on_device(ops)), gw_(ops, channels), gb_(ops, channels) {}

  void forward(std::span<const float> x, int n, std::span<float> y) override {
    bn_.forward(x, n, 1, y);
  }
  void backward(std::span<const float> x, std::span<const float> dy, std::span<float> dx,
                std::span<float> grad_weight, std::span<float> grad_bias) override {
    bn_.backward(x, dy, dx, gw_.span(), gb_.span());
    ops_.add(grad_weight, gw_.span());
    ops_.add(grad_bias, gb_.span());
  }
  void train(bool on) override { bn_.train(on); }
  std::span<float> weight() override { return bn_.weight(); }
  std::span<float> bias() override { return bn_.bias(); }
  std::span<float> running_mean() override { return bn_.running_mean(); }
  std::span<float> running_var() override { return bn_.running_var(); }

 private:
  const Ops& ops_;
  procgroup::ddp::SyncBatchNorm bn_;
  DeviceArray gw_, gb_;  // this backward's gradients, on their way to the add
};

}  // namespace

std::unique_ptr<BatchNorm> Ops::make_batch_norm(int channels,
                                                const procgroup::Group* sync_group) const {
  if (sync_group != nullptr) return make_sync_batch_norm(*sync_group, channels, *this);
  return local_batch_norm(channels);
}

std::unique_ptr<BatchNorm> make_sync_batch_norm(const procgroup::Group& group, int channels,
                                                const Ops& ops) {
  return std::make_unique<SyncBatchNormLayer>(group, channels, ops);
}

void allreduce_values(const procgroup::Group& group, const Ops& ops, std::span<double> values,
                      procgroup::ReduceOp op) {
  DeviceBuffer<double> scratch(ops, values.size());
  ops.to_device(scratch.data(), values.data(), values.size_bytes());
  // Stream NULL: after the copy above, on the legacy default stream. Once wait() returns,
  // the result is visible to the host copy below.
  const pg_buffer_t b = procgroup::ddp::TensorRef::of(scratch.span(), ops.device()).buffer();
  group.run(pg_allreduce, nullptr, &b, procgroup::op_options(op)).wait();
  ops.to_host(values.data(), scratch.data(), values.size_bytes());
}

}  // namespace fashion_mnist
