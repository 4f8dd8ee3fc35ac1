// Reducer: construction, bucket storage, gradient access and rebuilding. The per-pass
// protocol (mark, launch, finalize) is in reducer_pass.cc.
#include "procgroup/ddp/reducer.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "device.h"
#include "host_collective.h"
#include "kernels.h"
#include "param_check.h"
#include "procgroup/ddp/broadcast.h"
#include "reducer_bucket.h"

namespace procgroup::ddp {
namespace {

// The device every parameter is on (the first one's; CPU with none).
Device common_device(std::span<const Parameter> params) {
  return params.empty() ? Device{} : params.front().device;
}

detail::LocalProblem local_problem(std::span<const Parameter> params, const ReducerOptions& o) {
  const Device device = common_device(params);
  for (size_t i = 0; i < params.size(); ++i) {
    const Parameter& p = params[i];
    const std::string who = "parameter '" + p.name + "' (index " + std::to_string(i) + ")";
    if (p.device != device) {
      return {PG_ERR_INVALID_ARGUMENT,
              "parameters on more than one device: '" + params.front().name + "' is on " +
                  detail::device_name(device) + ", " + who + " on " +
                  detail::device_name(p.device) + "; a Reducer's parameters share one device"};
    }
    if (!is_floating(p.dtype)) {
      return {PG_ERR_INVALID_ARGUMENT, who + " has dtype " + dtype_name(p.dtype) +
                                           "; gradients must be f32, f64, f16 or bf16"};
    }
    if (p.numel > 0 && p.data == nullptr) {
      return {PG_ERR_INVALID_ARGUMENT, who + " has no data"};
    }
    if (p.numel > 0 && p.grad == nullptr && !o.gradient_as_bucket_view) {
      return {PG_ERR_INVALID_ARGUMENT,
              who + " has no gradient storage; set Parameter::grad or gradient_as_bucket_view"};
    }
  }
  try {
    detail::check_device(device);
  } catch (const Error& e) {
    return {e.status(), "parameters on " + detail::device_name(device) + ": " +
                            detail::bare_message(e)};
  }
  for (size_t i = 0; i < params.size(); ++i) {  // a host pointer would crash a kernel
    const Parameter& p = params[i];
    for (const void* ptr : {p.data, o.gradient_as_bucket_view ? nullptr : p.grad}) {
      if (p.numel == 0) break;
      const std::string why = detail::pointer_problem(device, ptr);
      if (!why.empty()) {
        return {PG_ERR_INVALID_ARGUMENT, "parameter '" + p.name + "' (index " +
                                             std::to_string(i) + "): " +
                                             (ptr == p.data ? "data " : "grad ") + why};
      }
    }
  }
  return {};
}

}  // namespace

NoSync::NoSync(NoSync&& other) noexcept
    : reducer_(std::exchange(other.reducer_, nullptr)), previous_(other.previous_) {}

NoSync::~NoSync() {
  if (reducer_ == nullptr) return;
  std::lock_guard lock(reducer_->mutex_);
  reducer_->sync_enabled_ = previous_;
}

Reducer::Reducer(const Group& group, std::vector<Parameter> params, ReducerOptions options)
    : group_(&group),
      world_size_(group.size()),
      params_(std::move(params)),
      device_(common_device(params_)),
      options_(std::move(options)),
      rebuild_pending_(options_.rebuild_buckets) {
  if (!options_.comm_hook) options_.comm_hook = allreduce_avg_hook();
  const detail::ReducerConfig config{options_.first_bucket_bytes, options_.bucket_cap_bytes,
                                     std::string(options_.comm_hook->name())};
  const detail::LocalProblem problem = local_problem(params_, options_);
  // Control messages travel through the parameters' device when the backend has no CPU
  // buffers (NCCL) and that device is usable; otherwise on the host.
  const detail::Exec via{problem.status == PG_OK ? device_ : Device{}, options_.cuda_stream};
  detail::check_parameters_agree(group, params_, config, problem, via);
  if (options_.broadcast_parameters) {
    broadcast_parameters(group, params_, 0, kBroadcastBucketBytes, options_.cuda_stream);
  }
  marks_.assign(params_.size(), Mark::kPending);
  build_buckets(reverse_order(params_.size()), false);
}

Reducer::~Reducer() {
  // Backends write into bucket storage until a reduction completes.
  for (auto& b : buckets_) {
    if (!b->work) continue;
    try {
      b->work->wait();
    } catch (...) {  // the failure was (or will be) reported by the call that saw it
    }
  }
}

void Reducer::build_buckets(std::span<const size_t> order, bool keep_grads) {
  const BucketLimits limits{options_.first_bucket_bytes, options_.bucket_cap_bytes};
  std::vector<std::unique_ptr<Bucket>> next;
  std::vector<Slot> slots(params_.size());
  for (BucketSpec& spec : assign_buckets(params_, order, limits)) {
    auto bucket = std::make_unique<Bucket>();
    uint64_t offset = 0;
    for (size_t p : spec.params) {
      slots[p] = {next.size(), offset};
      offset += params_[p].numel;
    }
    bucket->storage = detail::DeviceMemory(exec(), spec.bytes);
    bucket->spec = std::move(spec);
    next.push_back(std::move(bucket));
  }
  if (keep_grads) {  // gradients living in the old buckets move to the new ones
    for (size_t p = 0; p < params_.size(); ++p) {
      if (params_[p].numel == 0) continue;
      detail::copy(exec(), next[slots[p].bucket]->at(slots[p].offset),
                   buckets_[slots_[p].bucket]->at(slots_[p].offset), params_[p].bytes());
    }
  }
  buckets_ = std::move(next);
  slots_ = std::move(slots);
}

detail::Exec Reducer::exec() const { return {device_, options_.cuda_stream}; }

TensorRef Reducer::grad(size_t i) const {
  const Parameter& p = params_.at(i);
  if (!options_.gradient_as_bucket_view) return {p.grad, p.numel, p.dtype, p.device};
  const Slot& s = slots_[i];
  return {buckets_[s.bucket]->at(s.offset), p.numel, p.dtype, p.device};
}

void Reducer::zero_grad() {
  std::lock_guard lock(mutex_);
  check_usable();
  if (in_pass_) {
    throw Error(PG_ERR_INVALID_ARGUMENT, "zero_grad() called during a backward pass");
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    const TensorRef g = grad(i);
    if (g.numel > 0) detail::zero(exec(), g.data, g.bytes());
  }
}

NoSync Reducer::no_sync() {
  std::lock_guard lock(mutex_);
  const bool previous = sync_enabled_;
  sync_enabled_ = false;
  return NoSync(this, previous);
}

bool Reducer::sync_enabled() const {
  std::lock_guard lock(mutex_);
  return sync_enabled_;
}

std::vector<std::vector<size_t>> Reducer::bucket_params() const {
  std::vector<std::vector<size_t>> out;
  for (const auto& b : buckets_) out.push_back(b->spec.params);
  return out;
}

void Reducer::rebuild() {
  // Rank 0's observed order (never-marked parameters last) becomes everyone's.
  std::vector<int64_t> order;
  std::vector<bool> seen(params_.size(), false);
  for (size_t i : ready_order_) {
    order.push_back(static_cast<int64_t>(i));
    seen[i] = true;
  }
  for (size_t i = params_.size(); i-- > 0;) {
    if (!seen[i]) order.push_back(static_cast<int64_t>(i));
  }
  detail::host_broadcast(*group_, std::span(order), 0, exec());
  std::vector<size_t> agreed(order.begin(), order.end());
  std::vector<size_t> sorted = agreed;
  std::sort(sorted.begin(), sorted.end());
  std::vector<size_t> identity(params_.size());
  std::iota(identity.begin(), identity.end(), size_t{0});
  if (sorted != identity) fail(PG_ERR_INTERNAL, "rank 0's gradient order is not a permutation");

  const BucketLimits limits{options_.first_bucket_bytes, options_.bucket_cap_bytes};
  std::vector<BucketSpec> specs = assign_buckets(params_, agreed, limits);
  bool same = specs.size() == buckets_.size();
  for (size_t b = 0; same && b < specs.size(); ++b) same = specs[b] == buckets_[b]->spec;
  if (same) return;  // gradient storage stays where it is
  build_buckets(agreed, options_.gradient_as_bucket_view);
  ++layout_generation_;
}

std::string Reducer::describe(size_t i) const {
  const Parameter& p = params_[i];
  return "parameter '" + p.name + "' (index " + std::to_string(i) + ", " + dtype_name(p.dtype) +
         " x " + std::to_string(p.numel) + ")";
}

void Reducer::throw_dtype(size_t i, pg_dtype_t wanted) const {
  throw Error(PG_ERR_INVALID_ARGUMENT, "grad_as<" + std::string(dtype_name(wanted)) +
                                           ">: " + describe(i) + " is not " + dtype_name(wanted));
}

}  // namespace procgroup::ddp
