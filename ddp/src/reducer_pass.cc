// Reducer: one backward pass — marking gradients ready, launching buckets in order,
// finalize, and the errors of the mark-ready protocol.
#include <cstring>
#include <exception>

#include "device.h"
#include "procgroup/ddp/reducer.h"
#include "reducer_bucket.h"

namespace procgroup::ddp {
namespace {

// A bucket on the timeline (PROCGROUP_TIMELINE; a cheap no-op when it is off): "bucket"
// spans its last gradient's ready to done, "comm" its launch to done; done is when
// finalize() saw its work complete. Observability only, so a failure is not the pass's.
void timeline_mark(const Group& group, const char* name, size_t index, int32_t phase,
                   size_t bytes) {
  (void)pg_timeline_mark(group.handle(), "ddp", name, index, phase, bytes);
}

}  // namespace

void Reducer::check_usable() const {
  if (!broken_.empty()) {
    throw Error(PG_ERR_ABORTED, "this Reducer is unusable after an earlier failure: " + broken_);
  }
}

void Reducer::fail(pg_status_t status, const std::string& message) {
  broken_ = message;
  throw Error(status, message);
}

void Reducer::begin_pass() {
  in_pass_ = true;
  pass_synced_ = sync_enabled_;
  marks_.assign(params_.size(), Mark::kPending);
  for (auto& b : buckets_) b->pending = b->spec.params.size();
  next_launch_ = 0;
  ready_order_.clear();
}

void Reducer::end_pass() { in_pass_ = false; }

void Reducer::prepare_for_backward(std::span<const size_t> unused) {
  std::lock_guard lock(mutex_);
  check_usable();
  if (in_pass_) {
    throw Error(PG_ERR_INVALID_ARGUMENT,
                "prepare_for_backward() called during a backward pass; call it before the "
                "pass's first mark_grad_ready(), or finalize() the previous pass");
  }
  std::vector<bool> seen(params_.size(), false);
  for (size_t i : unused) {
    if (i >= params_.size()) {
      throw Error(PG_ERR_INVALID_ARGUMENT, "prepare_for_backward(): unused index " +
                                               std::to_string(i) + " out of range (" +
                                               std::to_string(params_.size()) + " parameters)");
    }
    if (seen[i]) {
      throw Error(PG_ERR_INVALID_ARGUMENT,
                  "prepare_for_backward(): " + describe(i) + " declared unused twice");
    }
    seen[i] = true;
  }
  begin_pass();
  for (size_t i : unused) set_ready(i, Mark::kUnused);
}

void Reducer::mark_grad_ready(size_t i) {
  std::lock_guard lock(mutex_);
  check_usable();
  if (i >= params_.size()) {
    throw Error(PG_ERR_INVALID_ARGUMENT, "mark_grad_ready(" + std::to_string(i) +
                                             "): out of range (" + std::to_string(params_.size()) +
                                             " parameters)");
  }
  if (!in_pass_) begin_pass();
  if (marks_[i] == Mark::kReady) {
    throw Error(PG_ERR_INVALID_ARGUMENT,
                "the gradient of " + describe(i) +
                    " was marked ready twice in one backward pass (finalize() ends a pass)");
  }
  if (marks_[i] == Mark::kUnused) {
    throw Error(PG_ERR_INVALID_ARGUMENT, "the gradient of " + describe(i) +
                                             " was marked ready after prepare_for_backward() "
                                             "declared it unused");
  }
  ready_order_.push_back(i);
  set_ready(i, Mark::kReady);
}

void Reducer::set_ready(size_t i, Mark mark) {
  marks_[i] = mark;
  if (!pass_synced_) return;
  const Parameter& p = params_[i];
  const Slot& s = slots_[i];
  Bucket& b = *buckets_[s.bucket];
  // Divide before summing, while copying in; bucket views are divided at launch instead,
  // and a hook that averages gets the gradients as they are.
  if (!options_.gradient_as_bucket_view) {
    const int divisor = options_.comm_hook->averages() ? 1 : world_size_;
    try {
      detail::divide_into(exec(), b.at(s.offset), p.grad, p.numel, p.dtype, divisor);
    } catch (const std::exception& e) {  // a CUDA failure: this rank cannot keep in step
      broken_ = e.what();
      throw;
    }
  }
  if (--b.pending == 0) {
    timeline_mark(*group_, "bucket", s.bucket, PG_TIMELINE_BEGIN, b.spec.bytes);
    launch_ready_buckets();
  }
}

void Reducer::launch_ready_buckets() {
  // Strictly in bucket order, so every rank issues the same collectives in the same order
  // whatever order its gradients arrive in.
  while (next_launch_ < buckets_.size() && buckets_[next_launch_]->pending == 0) {
    const size_t index = next_launch_++;
    Bucket& b = *buckets_[index];
    const GradBucket bucket{index, b.view(), b.spec.params, index + 1 == buckets_.size(),
                            options_.cuda_stream};
    try {
      if (options_.gradient_as_bucket_view && !options_.comm_hook->averages()) {
        detail::divide_into(exec(), b.at(0), b.at(0), b.spec.numel, b.spec.dtype, world_size_);
      }
      timeline_mark(*group_, "comm", index, PG_TIMELINE_BEGIN, b.spec.bytes);
      b.work = options_.comm_hook->start(*group_, bucket);
    } catch (const std::exception& e) {
      broken_ = std::string("bucket ") + std::to_string(index) + ": " + e.what();
      throw;
    }
    if (!b.work) {
      fail(PG_ERR_INVALID_ARGUMENT, "comm_hook '" + std::string(options_.comm_hook->name()) +
                                        "' returned no work for bucket " + std::to_string(index));
    }
  }
}

void Reducer::wait_buckets() {
  std::exception_ptr failure;
  for (size_t index = 0; index < buckets_.size(); ++index) {
    Bucket& b = *buckets_[index];
    if (!b.work) continue;
    try {
      b.work->wait();
    } catch (const std::exception& e) {
      if (!failure) {
        failure = std::current_exception();
        broken_ = e.what();
      }
    }
    b.work.reset();
    timeline_mark(*group_, "comm", index, PG_TIMELINE_END, b.spec.bytes);
    timeline_mark(*group_, "bucket", index, PG_TIMELINE_END, b.spec.bytes);
  }
  if (failure) std::rethrow_exception(failure);
}

void Reducer::finalize() {
  std::lock_guard lock(mutex_);
  check_usable();
  if (!in_pass_) begin_pass();
  if (pass_synced_ != sync_enabled_) {
    if (!pass_synced_) {
      end_pass();
      throw Error(PG_ERR_INVALID_ARGUMENT,
                  "a backward pass begun under no_sync() was finalized after no_sync() ended; "
                  "keep the NoSync guard alive until finalize()");
    }
    fail(PG_ERR_INVALID_ARGUMENT,
         "no_sync() was entered during a synchronised backward pass (buckets were already "
         "launched); enter it before the pass's first mark_grad_ready()");
  }
  if (!pass_synced_) {  // gradients just accumulate locally
    end_pass();
    return;
  }
  std::vector<size_t> missing;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (marks_[i] == Mark::kPending) missing.push_back(i);
  }
  if (!missing.empty() && !options_.find_unused_parameters) {
    std::string others = missing.size() > 1
                             ? " (and " + std::to_string(missing.size() - 1) + " more)"
                             : std::string();
    fail(PG_ERR_INVALID_ARGUMENT,
         "finalize(): the gradient of " + describe(missing.front()) + others +
             " was never marked ready in this backward pass; mark it, declare it in "
             "prepare_for_backward(unused), or set find_unused_parameters");
  }
  for (size_t i : missing) set_ready(i, Mark::kUnused);
  wait_buckets();
  if (!options_.gradient_as_bucket_view) {
    for (size_t i = 0; i < params_.size(); ++i) {
      const Parameter& p = params_[i];
      if (p.numel > 0) {
        detail::copy(exec(), p.grad, buckets_[slots_[i].bucket]->at(slots_[i].offset), p.bytes());
      }
    }
  }
  if (rebuild_pending_) {
    rebuild_pending_ = false;
    rebuild();
  }
  end_pass();
}

}  // namespace procgroup::ddp
