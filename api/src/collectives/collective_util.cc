#include "collectives/collective_util.h"

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <utility>

#include "common/dtype.h"

namespace procgroup::detail {

IoBatch::~IoBatch() {
  // Callers always wait(); this only guards a path that forgot, so that no transfer
  // outlives the buffers of the frame that posted it.
  for (Entry& e : entries_) {
    if (e.request) (void)e.request->wait();
  }
}

void IoBatch::add(Result<Request> posted, int peer, bool is_send) {
  if (!posted.ok()) {
    post_failure_ = posted.status();
    failed_peer_ = peer;
    failed_is_send_ = is_send;
    return;
  }
  entries_.push_back(Entry{std::move(posted).value(), peer, is_send});
}

void IoBatch::send(int peer, const void* data, size_t bytes, uint64_t tag) {
  if (bytes == 0 || !post_failure_.ok()) return;
  add(t_.isend(peer, data, bytes, tag), peer, true);
}

void IoBatch::recv(int peer, void* data, size_t bytes, uint64_t tag) {
  if (bytes == 0 || !post_failure_.ok()) return;
  add(t_.irecv(peer, data, bytes, tag), peer, false);
}

Status IoBatch::wait(const char* algorithm, uint64_t step) {
  Status first = std::move(post_failure_);
  int peer = failed_peer_;
  bool is_send = failed_is_send_;
  for (Entry& e : entries_) {
    if (!e.request) continue;
    Status s = e.request->wait();
    e.request.reset();
    if (!s.ok() && first.ok()) {
      first = std::move(s);
      peer = e.peer;
      is_send = e.is_send;
    }
  }
  entries_.clear();
  post_failure_ = Status();
  failed_peer_ = -1;
  if (first.ok()) return first;
  return first.with_context(fmt::format("{} step {}, {} rank {}", algorithm, step,
                                        is_send ? "sending to" : "receiving from", peer));
}

Result<size_t> check_args(const Transport& t, const CollectiveArgs& a, const char* op,
                          unsigned flags) {
  const int size = t.size();
  const int rank = t.rank();
  if (size < 1 || rank < 0 || rank >= size) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "{}: bad transport (rank {} of {})", op, rank, size);
  }
  const size_t elem = dtype_size(a.dtype);
  if (elem == 0) return make_error(PG_ERR_INVALID_ARGUMENT, "{}: invalid dtype {}", op, a.dtype);
  if ((flags & kCheckReduceOp) != 0 && !reduce_op_valid(a.reduce_op)) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "{}: invalid reduce op {}", op, a.reduce_op);
  }
  if ((flags & kCheckRoot) != 0 && (a.root < 0 || a.root >= size)) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "{}: root {} is not a rank of a group of {}", op,
                      a.root, size);
  }
  // Several operations address size * count elements; make sure that is representable.
  const uint64_t limit = std::numeric_limits<size_t>::max() / elem / static_cast<uint64_t>(size);
  if (a.count > limit) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "{}: count {} is too large", op, a.count);
  }
  return static_cast<size_t>(a.count) * elem;
}

Status require_buffer(const void* p, size_t bytes, const char* op, const char* what) {
  if (p == nullptr && bytes != 0) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "{}: {} is null", op, what);
  }
  return ok_status();
}

Status check_no_overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes,
                        const char* op) {
  if (a == nullptr || b == nullptr || a_bytes == 0 || b_bytes == 0) return ok_status();
  const auto a0 = reinterpret_cast<uintptr_t>(a);
  const auto b0 = reinterpret_cast<uintptr_t>(b);
  if (a0 < b0 + b_bytes && b0 < a0 + a_bytes) {
    return make_error(PG_ERR_INVALID_ARGUMENT,
                      "{}: input and output overlap other than in the in-place form", op);
  }
  return ok_status();
}

}  // namespace procgroup::detail
