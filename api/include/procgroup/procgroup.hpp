// procgroup.hpp — header-only C++20 RAII wrapper over procgroup.h.
//
// Groups and works are move-only owners of their C handles; failures throw
// procgroup::Error (status + message) — exceptions exist on this side of the C ABI only.
// Every operation is asynchronous and returns a Work; call wait() on it.
//
//   procgroup::Group group = procgroup::Group::from_env();   // torchrun/pgrun/srun/mpirun
//   std::vector<float> grad(1024, 1.0f);
//   group.allreduce(std::span(grad), procgroup::ReduceOp::kAvg).wait();
//   if (group.rank() == 0) std::printf("%s: %d ranks\n", group.backend().data(), group.size());
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "procgroup/procgroup.h"

namespace procgroup {

// A failed procgroup call: status() is the pg_status_t, what() the message.
class Error : public std::runtime_error {
 public:
  Error(pg_status_t status, const std::string& message)
      : std::runtime_error(std::string(pg_status_name(status)) + ": " + message), status_(status) {}
  pg_status_t status() const noexcept { return status_; }

 private:
  pg_status_t status_;
};

inline void check(pg_status_t status) {
  if (status != PG_OK) throw Error(status, pg_last_error());
}

enum class ReduceOp : int32_t {
  kSum = PG_REDUCE_SUM,
  kAvg = PG_REDUCE_AVG,
  kProd = PG_REDUCE_PROD,
  kMin = PG_REDUCE_MIN,
  kMax = PG_REDUCE_MAX,
};

// 16-bit floating types, carried as their bits.
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

template <class T>
constexpr pg_dtype_t dtype_of() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, float>)
    return PG_DTYPE_F32;
  else if constexpr (std::is_same_v<U, double>)
    return PG_DTYPE_F64;
  else if constexpr (std::is_same_v<U, Half>)
    return PG_DTYPE_F16;
  else if constexpr (std::is_same_v<U, BFloat16>)
    return PG_DTYPE_BF16;
  else if constexpr (std::is_same_v<U, int8_t>)
    return PG_DTYPE_I8;
  else if constexpr (std::is_same_v<U, uint8_t>)
    return PG_DTYPE_U8;
  else if constexpr (std::is_same_v<U, int32_t>)
    return PG_DTYPE_I32;
  else if constexpr (std::is_same_v<U, int64_t>)
    return PG_DTYPE_I64;
  else
    static_assert(sizeof(U) == 0, "procgroup: unsupported element type");
}

// A CPU buffer descriptor over a span.
template <class T>
pg_buffer_t buffer(std::span<T> data) {
  return pg_buffer_cpu(const_cast<std::remove_cv_t<T>*>(data.data()), data.size(), dtype_of<T>());
}

// Options for one operation (root, peer, tag, timeout), in the C struct's terms.
inline pg_op_options_t op_options(ReduceOp op = ReduceOp::kSum, int root = 0, int peer = 0,
                                  int tag = 0, std::chrono::milliseconds timeout = {}) {
  pg_op_options_t o = PG_OP_OPTIONS_INIT;
  o.reduce_op = static_cast<int32_t>(op);
  o.root = root;
  o.peer = peer;
  o.tag = tag;
  o.timeout_ms = timeout.count();
  return o;
}

class [[nodiscard]] Work {
 public:
  Work() = default;
  explicit Work(pg_work_t work) : work_(work) {}
  Work(Work&& other) noexcept : work_(std::exchange(other.work_, nullptr)) {}
  Work& operator=(Work&& other) noexcept {
    if (this != &other) {
      pg_work_release(work_);
      work_ = std::exchange(other.work_, nullptr);
    }
    return *this;
  }
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;
  ~Work() { pg_work_release(work_); }

  // True when completed; throws if it failed.
  bool test() {
    pg_status_t s = pg_work_test(work_);
    if (s == PG_PENDING) return false;
    check(s);
    return true;
  }
  // Blocks until completion (bounded by the group timeout); throws if it failed.
  void wait() { check(pg_work_wait(work_, -1)); }
  // False if timeout passed first (the work goes on); throws if it failed.
  bool wait_for(std::chrono::milliseconds timeout) {
    pg_status_t s = pg_work_wait(work_, timeout.count());
    if (s == PG_PENDING) return false;
    check(s);
    return true;
  }
  pg_work_t handle() const { return work_; }

 private:
  pg_work_t work_ = nullptr;
};

class Group {
 public:
  Group() = default;
  // Everything from the environment (torchrun variables, Slurm or Open MPI).
  static Group from_env() { return Group(nullptr); }
  explicit Group(const pg_group_options_t& options) : Group(&options) {}
  // Takes ownership of a C handle (may be NULL: an empty group).
  static Group adopt(pg_group_t handle) {
    Group g;
    g.group_ = handle;
    return g;
  }
  Group(Group&& other) noexcept : group_(std::exchange(other.group_, nullptr)) {}
  Group& operator=(Group&& other) noexcept {
    if (this != &other) {
      pg_group_destroy(group_);
      group_ = std::exchange(other.group_, nullptr);
    }
    return *this;
  }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  ~Group() { pg_group_destroy(group_); }

  // Destroys now and reports a failure (the destructor cannot).
  void destroy() { check(pg_group_destroy(std::exchange(group_, nullptr))); }

  bool valid() const { return group_ != nullptr; }
  pg_group_t handle() const { return group_; }
  int rank() const {
    int32_t r = 0;
    check(pg_group_rank(group_, &r));
    return r;
  }
  int size() const {
    int32_t s = 0;
    check(pg_group_size(group_, &s));
    return s;
  }
  std::string_view backend() const {
    const char* name = nullptr;
    check(pg_group_backend_name(group_, &name));
    return name;
  }
  pg_capabilities_t capabilities() const {
    pg_capabilities_t caps = PG_CAPABILITIES_INIT;
    check(pg_group_capabilities(group_, &caps));
    return caps;
  }
  // Collective; an invalid (empty) Group for color == PG_SPLIT_NO_COLOR.
  Group split(int color, int key) const {
    pg_group_t child = nullptr;
    check(pg_group_split(group_, color, key, &child));
    return adopt(child);
  }
  void abort() { check(pg_group_abort(group_)); }

  // Untyped forms, for callers that pick dtypes at run time (e.g. ddp).
  using CFn = pg_status_t (*)(pg_group_t, const pg_buffer_t*, const pg_buffer_t*,
                              const pg_op_options_t*, pg_work_t*);
  Work run(CFn fn, const pg_buffer_t* input, const pg_buffer_t* output,
           const pg_op_options_t& options) const {
    pg_work_t work = nullptr;
    check(fn(group_, input, output, &options, &work));
    return Work(work);
  }

  template <class T>
  Work allreduce(std::span<T> data, ReduceOp op = ReduceOp::kSum) const {
    pg_buffer_t b = buffer(data);
    return run(pg_allreduce, nullptr, &b, op_options(op));
  }
  template <class T>
  Work allreduce(std::span<const std::type_identity_t<T>> in, std::span<T> out,
                 ReduceOp op = ReduceOp::kSum) const {
    return two(pg_allreduce, in, out, op_options(op));
  }
  template <class T>
  Work broadcast(std::span<T> data, int root) const {
    pg_buffer_t b = buffer(data);
    return run(pg_broadcast, nullptr, &b, op_options(ReduceOp::kSum, root));
  }
  // out is only written on root (may be empty elsewhere).
  template <class T>
  Work reduce(std::span<const std::type_identity_t<T>> in, std::span<T> out, int root,
              ReduceOp op = ReduceOp::kSum) const {
    return two(pg_reduce, in, out, op_options(op, root));
  }
  template <class T>
  Work allgather(std::span<const std::type_identity_t<T>> in, std::span<T> out) const {
    return two(pg_allgather, in, out, op_options());
  }
  template <class T>
  Work reduce_scatter(std::span<const std::type_identity_t<T>> in, std::span<T> out,
                      ReduceOp op = ReduceOp::kSum) const {
    return two(pg_reduce_scatter, in, out, op_options(op));
  }
  template <class T>
  Work gather(std::span<const std::type_identity_t<T>> in, std::span<T> out, int root) const {
    return two(pg_gather, in, out, op_options(ReduceOp::kSum, root));
  }
  template <class T>
  Work scatter(std::span<const std::type_identity_t<T>> in, std::span<T> out, int root) const {
    return two(pg_scatter, in, out, op_options(ReduceOp::kSum, root));
  }
  template <class T>
  Work alltoall(std::span<const std::type_identity_t<T>> in, std::span<T> out) const {
    return two(pg_alltoall, in, out, op_options());
  }
  Work barrier() const {
    pg_work_t work = nullptr;
    pg_op_options_t o = op_options();
    check(pg_barrier(group_, &o, &work));
    return Work(work);
  }
  template <class T>
  Work send(std::span<T> data, int peer, int tag = 0) const {
    pg_buffer_t b = buffer(data);
    pg_op_options_t o = op_options(ReduceOp::kSum, 0, peer, tag);
    pg_work_t work = nullptr;
    check(pg_send(group_, &b, &o, &work));
    return Work(work);
  }
  template <class T>
  Work recv(std::span<T> data, int peer, int tag = 0) const {
    pg_buffer_t b = buffer(data);
    pg_op_options_t o = op_options(ReduceOp::kSum, 0, peer, tag);
    pg_work_t work = nullptr;
    check(pg_recv(group_, &b, &o, &work));
    return Work(work);
  }

 private:
  explicit Group(const pg_group_options_t* options) { check(pg_group_create(options, &group_)); }

  // Empty spans mean "absent" (e.g. a non-root's output).
  template <class T>
  Work two(CFn fn, std::span<const std::type_identity_t<T>> in, std::span<T> out,
           const pg_op_options_t& o) const {
    pg_buffer_t bi = buffer(in), bo = buffer(out);
    return run(fn, in.data() ? &bi : nullptr, out.data() ? &bo : nullptr, o);
  }

  pg_group_t group_ = nullptr;
};

}  // namespace procgroup
