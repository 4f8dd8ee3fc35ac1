#include "procgroup/ddp/comm_hook.h"

#include <cstdint>

#include "device.h"

namespace procgroup::ddp {
namespace {

class AllreduceHook : public CommHook {
 public:
  std::string_view name() const override { return "allreduce"; }
  std::unique_ptr<HookWork> start(const Group& group, const GradBucket& bucket) override {
    const pg_buffer_t b = bucket.buffer.buffer(bucket.cuda_stream);
    return std::make_unique<WorkHookWork>(
        group.run(pg_allreduce, nullptr, &b, op_options(ReduceOp::kSum)));
  }
};

class AllreduceAvgHook : public CommHook {
 public:
  std::string_view name() const override { return "allreduce_avg"; }
  bool averages() const override { return true; }
  std::unique_ptr<HookWork> start(const Group& group, const GradBucket& bucket) override {
    const TensorRef& t = bucket.buffer;
    ReduceOp op = ReduceOp::kAvg;
    if (t.dtype == PG_DTYPE_F16 || t.dtype == PG_DTYPE_BF16) {
      detail::divide_into(detail::Exec{t.device, bucket.cuda_stream}, t.data, t.data, t.numel,
                          t.dtype, group.size());
      op = ReduceOp::kSum;
    }
    const pg_buffer_t b = t.buffer(bucket.cuda_stream);
    return std::make_unique<WorkHookWork>(group.run(pg_allreduce, nullptr, &b, op_options(op)));
  }
};

// Owns the compressed copy (on the bucket's device) until the reduction finishes, then
// writes it back, on the bucket's stream.
class CompressedWork : public HookWork {
 public:
  CompressedWork(detail::DeviceMemory wire, pg_dtype_t wire_dtype, TensorRef target,
                 const detail::Exec& exec)
      : wire_(std::move(wire)), wire_dtype_(wire_dtype), target_(target), exec_(exec) {}
  // Abandoned without wait() (an exception, a pass given up): the allreduce may still
  // write into wire_, so let it end (bounded by the group timeout) before wire_ is freed.
  ~CompressedWork() override {
    if (work_.handle() != nullptr) (void)pg_work_wait(work_.handle(), -1);
  }
  void start(const Group& group) {
    const TensorRef w{wire_.data(), target_.numel, wire_dtype_, target_.device};
    const pg_buffer_t b = w.buffer(exec_.stream);
    work_ = group.run(pg_allreduce, nullptr, &b, op_options(ReduceOp::kSum));
  }
  void wait() override {
    work_.wait();  // on CUDA the sum is now visible to every stream
    detail::convert(exec_, target_.data, target_.dtype, wire_.data(), wire_dtype_, target_.numel);
  }

 private:
  detail::DeviceMemory wire_;
  pg_dtype_t wire_dtype_;
  TensorRef target_;
  detail::Exec exec_;
  Work work_;
};

class CompressHook : public CommHook {
 public:
  CompressHook(pg_dtype_t wire, std::string_view name) : wire_(wire), name_(name) {}
  std::string_view name() const override { return name_; }
  std::unique_ptr<HookWork> start(const Group& group, const GradBucket& bucket) override {
    // The bucket is already divided by the world size, so the 16-bit sum cannot overflow
    // where the mean does not (PyTorch's hook converts first, then divides).
    const detail::Exec exec{bucket.buffer.device, bucket.cuda_stream};
    detail::DeviceMemory wire(exec, bucket.buffer.numel * sizeof(uint16_t));
    detail::convert(exec, wire.data(), wire_, bucket.buffer.data, bucket.buffer.dtype,
                    bucket.buffer.numel);
    auto work = std::make_unique<CompressedWork>(std::move(wire), wire_, bucket.buffer, exec);
    work->start(group);
    return work;
  }

 private:
  pg_dtype_t wire_;
  std::string_view name_;
};

}  // namespace

std::shared_ptr<CommHook> allreduce_avg_hook() { return std::make_shared<AllreduceAvgHook>(); }
std::shared_ptr<CommHook> allreduce_hook() { return std::make_shared<AllreduceHook>(); }
std::shared_ptr<CommHook> fp16_compress_hook() {
  return std::make_shared<CompressHook>(PG_DTYPE_F16, "fp16_compress");
}
std::shared_ptr<CommHook> bf16_compress_hook() {
  return std::make_shared<CompressHook>(PG_DTYPE_BF16, "bf16_compress");
}

}  // namespace procgroup::ddp
