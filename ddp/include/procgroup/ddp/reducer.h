// reducer.h — data-parallel gradient averaging with communication overlapped with backward.
//
// Register the parameters once; in every backward pass call mark_grad_ready(i) as soon as
// gradient i is complete, then finalize(). A bucket's reduction starts the moment its last
// gradient is marked (buckets launch in bucket order, the same on every rank), so
// communication overlaps the rest of backward. After finalize() every gradient holds the
// mean over ranks. Gradients accumulate: zero them after the optimizer step (zero_grad()).
//
//   procgroup::Group group = procgroup::Group::from_env();
//   ddp::Reducer reducer(group, {ddp::Parameter::of("w", std::span(w), std::span(gw)),
//                                ddp::Parameter::of("b", std::span(b), std::span(gb))});
//   for (step ...) {
//     forward(...);
//     backward_layer2(gb);  reducer.mark_grad_ready(1);   // bucket may start here
//     backward_layer1(gw);  reducer.mark_grad_ready(0);
//     reducer.finalize();                                 // gw, gb: averaged over ranks
//     sgd_step(); reducer.zero_grad();
//   }
//
// CUDA: register device pointers with Device{PG_DEVICE_CUDA, local_rank} (all parameters
// on that one device) and set ReducerOptions::cuda_stream if backward does not run on the
// legacy default stream. After finalize() the averaged gradients are complete in stream
// order: kernels enqueued later on cuda_stream see them, the host must synchronise first.
//
// Not thread-safe with respect to itself except that mark_grad_ready may be called from
// several threads at once. The group must outlive the Reducer and stay at the same address
// (the Reducer keeps a pointer to it). The Reducer issues collectives on it only from its
// constructor, mark_grad_ready, prepare_for_backward and finalize, so other collectives on
// the same group must be ordered around those calls the same way on every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "procgroup/ddp/bucket_assignment.h"
#include "procgroup/ddp/comm_hook.h"
#include "procgroup/ddp/error.h"
#include "procgroup/ddp/tensor.h"
#include "procgroup/procgroup.hpp"

namespace procgroup::ddp {
namespace detail {
struct Exec;
}

struct ReducerOptions {
  size_t first_bucket_bytes = size_t{1} << 20;
  size_t bucket_cap_bytes = size_t{25} << 20;
  // Gradients live inside the buckets (no copies); grad(i) hands out the storage and
  // Parameter::grad is ignored. grad(i) may move once, in the finalize() that rebuilds.
  bool gradient_as_bucket_view = false;
  // finalize() treats gradients never marked as unused (reducing their current contents,
  // normally zero) instead of throwing. Buckets holding them launch only at finalize().
  bool find_unused_parameters = false;
  // After the first synchronised pass, re-bucket in rank 0's observed ready order.
  bool rebuild_buckets = true;
  // Broadcast parameter values from rank 0 at construction (as PyTorch DDP does).
  bool broadcast_parameters = true;
  // Null: allreduce_avg_hook() (averages in the allreduce; comm_hook.h).
  std::shared_ptr<CommHook> comm_hook;
  // CUDA parameters: the stream (cudaStream_t) backward produces gradients on; NULL is the
  // legacy default stream. Copies into buckets, the 1/world_size division, compression,
  // zero_grad() and the copies back all run on it in order, and every collective is
  // ordered after it, so no other synchronisation is needed. Ignored on the CPU.
  void* cuda_stream = nullptr;
};

class Reducer;

// While alive, backward passes accumulate gradients locally without communication.
class [[nodiscard]] NoSync {
 public:
  NoSync(NoSync&& other) noexcept;
  NoSync& operator=(NoSync&&) = delete;
  NoSync(const NoSync&) = delete;
  ~NoSync();

 private:
  friend class Reducer;
  NoSync(Reducer* reducer, bool previous) : reducer_(reducer), previous_(previous) {}
  Reducer* reducer_;
  bool previous_;
};

class Reducer {
 public:
  // Collective: checks that every rank registered the same parameters (count, names, sizes,
  // dtypes, devices) and options; on any difference every rank throws ddp::Error
  // (PG_ERR_MISMATCH) saying what differs. Parameters on more than one device, or memory
  // that is not on the declared device: PG_ERR_INVALID_ARGUMENT; CUDA parameters without
  // CUDA (build or device): PG_ERR_UNSUPPORTED; reported by every rank.
  Reducer(const Group& group, std::vector<Parameter> params, ReducerOptions options = {});
  ~Reducer();  // waits for reductions still in flight (bounded by the group timeout)
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  size_t num_parameters() const { return params_.size(); }
  const Parameter& parameter(size_t i) const { return params_.at(i); }
  // Where gradient i accumulates: its bucket slot with gradient_as_bucket_view, else
  // Parameter::grad. Fetch it again after each finalize(); a rebuild may move it.
  TensorRef grad(size_t i) const;
  template <class T>
  std::span<T> grad_as(size_t i) const {
    TensorRef g = grad(i);
    if (g.dtype != dtype_of<T>()) throw_dtype(i, dtype_of<T>());
    return {static_cast<T*>(g.data), g.numel};
  }
  // Zeroes every gradient (outside a backward pass).
  void zero_grad();

  // Optional, before a pass's first mark_grad_ready: declares parameters this rank will not
  // produce gradients for in this pass (their current gradient contents are reduced).
  void prepare_for_backward(std::span<const size_t> unused = {});
  // Gradient i is complete for this pass. Throws if i was already marked or declared unused.
  void mark_grad_ready(size_t i);
  // Ends the pass: waits for every bucket and leaves each gradient averaged over the ranks
  // (or, under no_sync, just ends the pass). Throws, naming the parameter, when a gradient
  // was never marked and find_unused_parameters is off.
  void finalize();
  NoSync no_sync();
  bool sync_enabled() const;

  // Current assignment (bucket 0 launches first) and how often it changed.
  std::vector<std::vector<size_t>> bucket_params() const;
  size_t num_buckets() const { return buckets_.size(); }
  int layout_generation() const { return layout_generation_; }

 private:
  friend class NoSync;
  enum class Mark : uint8_t { kPending, kReady, kUnused };
  struct Bucket;
  struct Slot {
    size_t bucket = 0;
    uint64_t offset = 0;  // elements from the bucket's start
  };

  void build_buckets(std::span<const size_t> order, bool keep_grads);
  detail::Exec exec() const;  // the parameters' device and options_.cuda_stream
  void check_usable() const;
  [[noreturn]] void fail(pg_status_t status, const std::string& message);
  [[noreturn]] void throw_dtype(size_t i, pg_dtype_t wanted) const;
  std::string describe(size_t i) const;
  void begin_pass();
  void end_pass();
  void set_ready(size_t i, Mark mark);
  void launch_ready_buckets();
  void wait_buckets();
  void rebuild();

  const Group* group_;
  int world_size_;
  std::vector<Parameter> params_;
  Device device_;  // of every parameter (CPU when there are none)
  ReducerOptions options_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<Slot> slots_;
  int layout_generation_ = 0;

  mutable std::mutex mutex_;  // guards the pass state below
  bool sync_enabled_ = true;
  bool in_pass_ = false;
  bool pass_synced_ = true;
  std::vector<Mark> marks_;
  std::vector<size_t> ready_order_;
  size_t next_launch_ = 0;
  bool rebuild_pending_;
  std::string broken_;  // set by a failure that desynchronises ranks; every call then throws
};

}  // namespace procgroup::ddp
