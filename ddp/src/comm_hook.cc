#include "procgroup/ddp/comm_hook.h"

#include <cstdint>
#include <vector>

#include "kernels.h"

namespace procgroup::ddp {
namespace {

class AllreduceHook : public CommHook {
 public:
  std::string_view name() const override { return "allreduce"; }
  std::unique_ptr<HookWork> start(const Group& group, const GradBucket& bucket) override {
    const pg_buffer_t b = bucket.buffer.buffer();
    return std::make_unique<WorkHookWork>(
        group.run(pg_allreduce, nullptr, &b, op_options(ReduceOp::kSum)));
  }
};

// Owns the compressed copy until the reduction finishes, then writes it back.
class CompressedWork : public HookWork {
 public:
  CompressedWork(std::vector<uint16_t> wire, pg_dtype_t wire_dtype, TensorRef target)
      : wire_(std::move(wire)), wire_dtype_(wire_dtype), target_(target) {}
  void start(const Group& group) {
    const pg_buffer_t b = pg_buffer_cpu(wire_.data(), wire_.size(), wire_dtype_);
    work_ = group.run(pg_allreduce, nullptr, &b, op_options(ReduceOp::kSum));
  }
  void wait() override {
    work_.wait();
    detail::convert(target_.data, target_.dtype, wire_.data(), wire_dtype_, target_.numel);
  }

 private:
  std::vector<uint16_t> wire_;
  pg_dtype_t wire_dtype_;
  TensorRef target_;
  Work work_;
};

class CompressHook : public CommHook {
 public:
  CompressHook(pg_dtype_t wire, std::string_view name) : wire_(wire), name_(name) {}
  std::string_view name() const override { return name_; }
  std::unique_ptr<HookWork> start(const Group& group, const GradBucket& bucket) override {
    // The bucket is already divided by the world size, so the 16-bit sum cannot overflow
    // where the mean does not (PyTorch's hook converts first, then divides).
    std::vector<uint16_t> wire(bucket.buffer.numel);
    detail::convert(wire.data(), wire_, bucket.buffer.data, bucket.buffer.dtype, wire.size());
    auto work = std::make_unique<CompressedWork>(std::move(wire), wire_, bucket.buffer);
    work->start(group);
    return work;
  }

 private:
  pg_dtype_t wire_;
  std::string_view name_;
};

}  // namespace

std::shared_ptr<CommHook> allreduce_hook() { return std::make_shared<AllreduceHook>(); }
std::shared_ptr<CommHook> fp16_compress_hook() {
  return std::make_shared<CompressHook>(PG_DTYPE_F16, "fp16_compress");
}
std::shared_ptr<CommHook> bf16_compress_hook() {
  return std::make_shared<CompressHook>(PG_DTYPE_BF16, "bf16_compress");
}

}  // namespace procgroup::ddp
