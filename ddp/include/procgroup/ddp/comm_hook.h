// comm_hook.h — how a gradient bucket is communicated: the default allreduce, fp16/bf16
// compression, or the user's own hook.
//
// A hook's start() is called once per bucket, as soon as the bucket is ready, in bucket
// order, identically on every rank. The bucket's buffer holds this rank's gradients already
// divided by the world size ("divide before summing": no overflow in half precision); the
// hook must start an asynchronous reduction and return a HookWork whose wait() leaves the
// SUM over ranks in that same buffer. A hook whose averages() is true gets the gradients
// undivided instead and must leave their MEAN over ranks (the Reducer skips its own pass
// over them). The buffer stays valid and untouched by the Reducer until wait() returns.
//
//   struct Logged : ddp::CommHook {
//     std::string_view name() const override { return "logged"; }
//     std::unique_ptr<ddp::HookWork> start(const Group& g, const ddp::GradBucket& b) override {
//       std::printf("bucket %zu: %llu elements\n", b.index, (unsigned long long)b.buffer.numel);
//       return ddp::allreduce_hook()->start(g, b);   // CPU and CUDA buckets alike
//     }
//   };
//   options.comm_hook = std::make_shared<Logged>();
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>

#include "procgroup/ddp/tensor.h"
#include "procgroup/procgroup.hpp"

namespace procgroup::ddp {

struct GradBucket {
  size_t index = 0;                // 0 is the first bucket launched in a pass
  TensorRef buffer;                // flat gradients of one dtype, pre-divided by world size
                                   // unless the hook averages()
  std::span<const size_t> params;  // parameter indices laid out in buffer, in order
  bool is_last = false;            // the last bucket of the pass
  // CUDA buckets: the Reducer's cuda_stream. Pass it in every pg_buffer_t (buffer.buffer(
  // cuda_stream)) and enqueue any kernel on it, so the reduction follows the bucket's
  // preparation; wait() must leave the sum complete in that stream's order.
  void* cuda_stream = nullptr;
};

class HookWork {
 public:
  virtual ~HookWork() = default;
  // Blocks until the bucket's buffer holds the sum over ranks; throws procgroup::Error.
  virtual void wait() = 0;
};

class CommHook {
 public:
  virtual ~CommHook() = default;
  // Part of the construction-time agreement check: ranks must use the same hook.
  virtual std::string_view name() const = 0;
  virtual std::unique_ptr<HookWork> start(const Group& group, const GradBucket& bucket) = 0;
  // True: start() gets the bucket undivided and leaves the mean over ranks, not the sum.
  virtual bool averages() const { return false; }
};

// A HookWork that waits on one procgroup::Work (for hooks built on plain collectives).
class WorkHookWork : public HookWork {
 public:
  explicit WorkHookWork(Work work) : work_(std::move(work)) {}
  void wait() override { work_.wait(); }
  Work& work() { return work_; }

 private:
  Work work_;
};

// The default: PG_REDUCE_AVG-allreduce of the undivided bucket (averages() is true). The
// backend divides once after summing, inside its reduction where it can (ucx, NCCL), which
// saves the Reducer's separate pass over every gradient. 16-bit buckets are divided first
// and SUM-reduced, as allreduce_hook does, so they cannot overflow where the mean does not.
// With 2 ranks (any power of two) the result is bit-identical to allreduce_hook's.
std::shared_ptr<CommHook> allreduce_avg_hook();
// SUM-allreduce of the (pre-divided) bucket as it is: for hooks that wrap it.
std::shared_ptr<CommHook> allreduce_hook();
// Converts the (pre-divided) bucket to IEEE half / bfloat16, SUM-allreduces that, and
// converts back on wait(): half the bytes on the wire, at 11 / 8 bits of precision.
std::shared_ptr<CommHook> fp16_compress_hook();
std::shared_ptr<CommHook> bf16_compress_hook();

}  // namespace procgroup::ddp
