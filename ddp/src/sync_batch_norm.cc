// SyncBatchNorm: one code path for every device. The loops are in batch_norm_kernels.h (CPU
// or CUDA); the statistics exchange and Chan's combination run here, on the host, with the
// same layout on every device: [count, mean(C), invstd(C)] per rank, allgathered.
#include "procgroup/ddp/sync_batch_norm.h"

#include <cmath>
#include <string>
#include <vector>

#include "batch_norm_kernels.h"
#include "device.h"
#include "procgroup/ddp/error.h"

namespace procgroup::ddp {

// All on options.device: params = [weight, bias, running_mean, running_var] (C floats each);
// stats = [mean, invstd, unbiased variance] (C doubles each); row, all = this rank's and every
// rank's [count, mean(C), invstd(C)]; sums = [sum_dy, sum_dy_xmu] (C doubles each).
struct SyncBatchNorm::State {
  detail::Exec exec;
  detail::DeviceMemory params, stats, row, all, sums;
};

SyncBatchNorm::SyncBatchNorm(const Group& group, int64_t channels, SyncBatchNormOptions options)
    : group_(&group), channels_(channels), options_(options) {
  if (channels <= 0) {
    throw Error(PG_ERR_INVALID_ARGUMENT, "SyncBatchNorm: channels must be positive");
  }
  detail::check_device(options.device);
  const detail::Exec exec{options.device, options.cuda_stream};
  const size_t C = static_cast<size_t>(channels), row = 1 + 2 * C;
  state_ = std::make_unique<State>(State{
      exec, detail::DeviceMemory(exec, 4 * C * sizeof(float)),
      detail::DeviceMemory(exec, 3 * C * sizeof(double)),
      detail::DeviceMemory(exec, row * sizeof(double)),
      detail::DeviceMemory(exec, row * group.size() * sizeof(double)),
      detail::DeviceMemory(exec, 2 * C * sizeof(double))});
  std::vector<float> initial(4 * C, 0.0f);
  for (size_t c = 0; c < C; ++c) initial[c] = initial[3 * C + c] = 1.0f;  // weight, var
  detail::from_host(exec, state_->params.data(), initial.data(), initial.size() * sizeof(float));
}

SyncBatchNorm::~SyncBatchNorm() = default;
SyncBatchNorm::SyncBatchNorm(SyncBatchNorm&&) noexcept = default;
SyncBatchNorm& SyncBatchNorm::operator=(SyncBatchNorm&&) noexcept = default;

std::span<float> SyncBatchNorm::slice(int k) {
  return {state_->params.as<float>() + k * channels_, static_cast<size_t>(channels_)};
}

void SyncBatchNorm::check_sizes(size_t x, size_t other, const char* what) const {
  if (x != other) {
    throw Error(PG_ERR_INVALID_ARGUMENT, std::string("SyncBatchNorm: ") + what + " has " +
                                             std::to_string(other) + " elements, expected " +
                                             std::to_string(x));
  }
}

// Global mean and invstd (and the unbiased variance for the running statistics) into
// state_->stats; running statistics updated in training.
void SyncBatchNorm::batch_statistics(const float* x, int64_t n, int64_t S) {
  const int64_t C = channels_;
  const int size = group_->size();
  const detail::Exec& exec = state_->exec;
  detail::bn_local_stats(exec, {n, C, S}, x, options_.eps, state_->row.as<double>());
  const TensorRef row{state_->row.data(), static_cast<uint64_t>(1 + 2 * C), PG_DTYPE_F64,
                      options_.device};
  const TensorRef all{state_->all.data(), row.numel * size, PG_DTYPE_F64, options_.device};
  const pg_buffer_t in = row.buffer(exec.stream), out = all.buffer(exec.stream);
  group_->run(pg_allgather, &in, &out, op_options()).wait();
  std::vector<double> table(all.numel);
  detail::to_host(exec, table.data(), all.data, all.bytes());

  // Chan et al.: combine (count, mean, M2) pairwise; empty ranks contribute nothing.
  std::vector<double> stats(3 * C, 0.0), m2(C, 0.0);
  double total = 0;
  for (int r = 0; r < size; ++r) {
    const double* rank_row = &table[r * (1 + 2 * C)];
    const double nr = rank_row[0];
    if (nr <= 0) continue;
    for (int64_t c = 0; c < C; ++c) {
      const double invstd_r = rank_row[1 + C + c];
      const double var_r = 1.0 / (invstd_r * invstd_r) - options_.eps;
      const double delta = rank_row[1 + c] - stats[c];
      stats[c] += delta * nr / (total + nr);
      m2[c] += var_r * nr + delta * delta * total * nr / (total + nr);
    }
    total += nr;
  }
  if (total <= 1) {
    throw Error(PG_ERR_INVALID_ARGUMENT,
                "SyncBatchNorm: expected more than 1 value per channel across all ranks "
                "in training, got " +
                    std::to_string(static_cast<int64_t>(total)));
  }
  total_count_ = total;
  for (int64_t c = 0; c < C; ++c) {
    stats[C + c] = 1.0 / std::sqrt(m2[c] / total + options_.eps);
    stats[2 * C + c] = m2[c] / (total - 1);
  }
  detail::from_host(exec, state_->stats.data(), stats.data(), stats.size() * sizeof(double));
  if (training_ && options_.track_running_stats) {
    detail::bn_update_running(exec, C, running_mean().data(), running_var().data(),
                              state_->stats.as<double>(), options_.momentum);
    ++num_batches_tracked_;
  }
}

void SyncBatchNorm::forward(std::span<const float> x, int64_t n, int64_t spatial,
                            std::span<float> y) {
  if (n < 0 || spatial <= 0) {
    throw Error(PG_ERR_INVALID_ARGUMENT, "SyncBatchNorm: need n >= 0 and spatial > 0");
  }
  const int64_t C = channels_;
  check_sizes(static_cast<size_t>(n * C * spatial), x.size(), "x");
  check_sizes(x.size(), y.size(), "y");
  n_ = n;
  spatial_ = spatial;
  saved_batch_stats_ = uses_batch_stats();
  const detail::Exec& exec = state_->exec;
  if (saved_batch_stats_) {
    batch_statistics(x.data(), n, spatial);
  } else {
    detail::bn_running_to_stats(exec, C, running_mean().data(), running_var().data(),
                                options_.eps, state_->stats.as<double>());
  }
  detail::bn_normalize(exec, {n, C, spatial}, x.data(), y.data(), state_->stats.as<double>(),
                       options_.affine ? weight().data() : nullptr,
                       options_.affine ? bias().data() : nullptr);
}

void SyncBatchNorm::backward(std::span<const float> x, std::span<const float> dy,
                             std::span<float> dx, std::span<float> grad_weight,
                             std::span<float> grad_bias) {
  const int64_t C = channels_;
  const detail::BnShape shape{n_, C, spatial_};
  const size_t elems = static_cast<size_t>(n_ * C * spatial_);
  check_sizes(elems, x.size(), "x");
  check_sizes(elems, dy.size(), "dy");
  check_sizes(elems, dx.size(), "dx");
  if (!grad_weight.empty()) check_sizes(C, grad_weight.size(), "grad_weight");
  if (!grad_bias.empty()) check_sizes(C, grad_bias.size(), "grad_bias");
  const detail::Exec& exec = state_->exec;
  const double* stats = state_->stats.as<double>();
  double* sums = state_->sums.as<double>();

  // Local sums first: they are also this rank's weight and bias gradients.
  detail::bn_backward_reduce(exec, shape, x.data(), dy.data(), stats, sums,
                             grad_weight.empty() ? nullptr : grad_weight.data(),
                             grad_bias.empty() ? nullptr : grad_bias.data());
  if (saved_batch_stats_) {
    const TensorRef t{sums, static_cast<uint64_t>(2 * C), PG_DTYPE_F64, options_.device};
    const pg_buffer_t b = t.buffer(exec.stream);
    group_->run(pg_allreduce, nullptr, &b, op_options(ReduceOp::kSum)).wait();
  }
  detail::bn_backward_input(exec, shape, x.data(), dy.data(), dx.data(), stats,
                            options_.affine ? weight().data() : nullptr,
                            saved_batch_stats_ ? sums : nullptr,
                            saved_batch_stats_ ? total_count_ : 0.0);
}

}  // namespace procgroup::ddp
