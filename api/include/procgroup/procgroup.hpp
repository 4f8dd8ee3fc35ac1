// procgroup.hpp — header-only C++20 RAII wrapper over procgroup.h.
//
// Groups and works are move-only owners of their C handles; failures throw
// procgroup::Error (status + message) — exceptions exist on this side of the C ABI only.
// Every operation is asynchronous and returns a Work; call wait() (or wait_for, test) on it.
// Buffers are contiguous containers taken as they are (std::vector, std::array, std::span,
// C arrays) or DeviceSpans for memory on a GPU; per-operation Options carry the timeout.
//
//   procgroup::Group group = procgroup::Group::from_env();   // torchrun/pgrun/srun/mpirun
//   std::vector<float> grad(1024, 1.0f);
//   group.allreduce(grad, procgroup::ReduceOp::kAvg).wait();
//   group.allreduce(procgroup::cuda_span(d_grad, n, device, stream)).wait();  // CUDA memory
//   group.barrier({.timeout = std::chrono::seconds(5)}).wait();
//   if (group.rank() == 0) std::printf("%s: %d ranks\n", group.backend().data(), group.size());
//
// C++20 only: from C or an older C++, use procgroup/procgroup.h (the same ABI).
#pragma once

#if !defined(__cplusplus) || __cplusplus < 202002L
#error "procgroup.hpp needs C++20 (-std=c++20; CMake: link procgroup::procgroup, which requires cxx_std_20). From C or C++17 and older, include procgroup/procgroup.h, the C API."
#else  // the rest of the header: only the message above below C++20

#include <chrono>
#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <ranges>
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

namespace detail {
template <class U>
inline constexpr bool kIsCharacter =
    std::is_same_v<U, bool> || std::is_same_v<U, char> || std::is_same_v<U, wchar_t> ||
    std::is_same_v<U, char8_t> || std::is_same_v<U, char16_t> || std::is_same_v<U, char32_t>;

// The dtype of an element type, PG_DTYPE_INVALID for types procgroup does not carry.
// Integers go by width and sign, so long long and long are both I64 on LP64.
template <class T>
constexpr pg_dtype_t dtype_or_invalid() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, float>) return PG_DTYPE_F32;
  if constexpr (std::is_same_v<U, double>) return PG_DTYPE_F64;
  if constexpr (std::is_same_v<U, Half>) return PG_DTYPE_F16;
  if constexpr (std::is_same_v<U, BFloat16>) return PG_DTYPE_BF16;
  if constexpr (std::is_integral_v<U> && !kIsCharacter<U>) {
    if constexpr (sizeof(U) == 1) return std::is_signed_v<U> ? PG_DTYPE_I8 : PG_DTYPE_U8;
    if constexpr (std::is_signed_v<U> && sizeof(U) == 4) return PG_DTYPE_I32;
    if constexpr (std::is_signed_v<U> && sizeof(U) == 8) return PG_DTYPE_I64;
  }
  return PG_DTYPE_INVALID;
}
}  // namespace detail

// An element type procgroup carries (f32, f64, f16, bf16, i8, u8, i32, i64).
template <class T>
concept Element = detail::dtype_or_invalid<T>() != PG_DTYPE_INVALID;

template <class T>
constexpr pg_dtype_t dtype_of() {
  static_assert(Element<T>, "procgroup: unsupported element type");
  return detail::dtype_or_invalid<T>();
}

// A contiguous container of Elements that outlives the call: std::vector, std::array,
// std::span, C arrays... (a temporary std::vector is refused: the work would outlive it).
template <class R>
concept HostRange =
    std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
    (std::is_lvalue_reference_v<R> || std::ranges::borrowed_range<R>) &&
    Element<std::remove_reference_t<std::ranges::range_reference_t<R>>>;
// A HostRange an operation may write to.
template <class R>
concept MutableHostRange =
    HostRange<R> && !std::is_const_v<std::remove_reference_t<std::ranges::range_reference_t<R>>>;

enum class Device : int32_t { kCpu = PG_DEVICE_CPU, kCuda = PG_DEVICE_CUDA };

// Memory on a device, described and never touched on the host: e.g. a cudaMalloc'd array
// and the stream the operation must be ordered on.
template <Element T>
struct DeviceSpan {
  T* data = nullptr;
  uint64_t count = 0;  // elements
  Device device = Device::kCuda;
  int32_t device_index = 0;
  void* stream = nullptr;  // cudaStream_t; nullptr: the default stream
};

// CUDA memory on GPU `device`, ordered on `stream` (nullptr: the default stream).
template <Element T>
DeviceSpan<T> cuda_span(T* data, uint64_t count, int32_t device, void* stream = nullptr) {
  return {data, count, Device::kCuda, device, stream};
}

// A CPU buffer descriptor over a span.
template <class T>
pg_buffer_t buffer(std::span<T> data) {
  return pg_buffer_cpu(const_cast<std::remove_cv_t<T>*>(data.data()), data.size(), dtype_of<T>());
}
// A buffer descriptor for device memory (device type, index and stream filled in).
template <class T>
pg_buffer_t buffer(const DeviceSpan<T>& span) {
  pg_buffer_t b = PG_BUFFER_INIT;
  b.dtype = dtype_of<T>();
  b.data = const_cast<std::remove_cv_t<T>*>(span.data);
  b.count = span.count;
  b.device_type = static_cast<int32_t>(span.device);
  b.device_index = span.device_index;
  b.stream = span.stream;
  return b;
}

// What an operation reads: a HostRange or a DeviceSpan (implicitly), or a pg_buffer_t built
// at run time (explicitly). A null data pointer means "absent" (e.g. a non-root's output).
class ConstBuffer {
 public:
  template <HostRange R>
  ConstBuffer(R&& range)  // NOLINT(google-explicit-constructor): containers pass as they are
      : b_(buffer(std::span(std::ranges::data(range), std::ranges::size(range)))) {}
  template <class T>
  ConstBuffer(const DeviceSpan<T>& span)  // NOLINT(google-explicit-constructor)
      : b_(buffer(span)) {}
  explicit ConstBuffer(const pg_buffer_t& b) : b_(b) {}

  const pg_buffer_t& c_buffer() const { return b_; }
  // NULL for an absent buffer, as the C calls take it.
  const pg_buffer_t* c_pointer() const { return b_.data != nullptr ? &b_ : nullptr; }

 protected:
  ConstBuffer() = default;
  pg_buffer_t b_ = PG_BUFFER_INIT;
};

// What an operation writes: a MutableHostRange or a DeviceSpan of non-const elements.
class Buffer : public ConstBuffer {
 public:
  template <MutableHostRange R>
  Buffer(R&& range) {  // NOLINT(google-explicit-constructor)
    b_ = buffer(std::span(std::ranges::data(range), std::ranges::size(range)));
  }
  template <class T>
    requires(!std::is_const_v<T>)
  Buffer(const DeviceSpan<T>& span) {  // NOLINT(google-explicit-constructor)
    b_ = buffer(span);
  }
  explicit Buffer(const pg_buffer_t& b) { b_ = b; }
};

// Per-operation settings beyond the call's own arguments (op, root, peer, tag). A device and
// stream belong to each buffer in the C ABI, so they travel on DeviceSpan.
struct Options {
  // 0: the group's timeout. When it passes, the work fails with PG_ERR_TIMEOUT (and the
  // group is aborted, as for the group timeout).
  std::chrono::milliseconds timeout{0};
};

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

// One operation in flight: polled (test), waited for with a bound (wait_for, wait_until)
// or waited for (wait), or given a completion callback (on_complete); none of them starts
// a thread.
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

  bool valid() const { return work_ != nullptr; }
  // True when completed; throws if it failed. Never blocks.
  bool test() {
    pg_status_t s = pg_work_test(work_);
    if (s == PG_PENDING) return false;
    check(s);
    return true;
  }
  // Blocks until completion (bounded by the operation's or the group's timeout); throws if
  // it failed.
  void wait() { check(pg_work_wait(work_, -1)); }
  // False if `timeout` passed first (the work goes on: wait again, or release it); throws if
  // it failed. Rounded up to whole milliseconds; a negative timeout only polls.
  template <class Rep, class Period>
  bool wait_for(std::chrono::duration<Rep, Period> timeout) {
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(timeout).count();
    pg_status_t s = pg_work_wait(work_, ms > 0 ? static_cast<int64_t>(ms) : 0);
    if (s == PG_PENDING) return false;
    check(s);
    return true;
  }
  template <class Clock, class Duration>
  bool wait_until(std::chrono::time_point<Clock, Duration> deadline) {
    return wait_for(deadline - Clock::now());
  }
  // Calls fn(status, message) once when the work completes (message: "" on PG_OK), on the
  // thread that completes it, or here before returning if it has (pg_work_on_complete).
  // It runs even if this Work is destroyed first. fn must be quick and must not throw: it
  // runs on a library thread, where an exception ends the program. Throws Error if a
  // callback was set already.
  void on_complete(std::function<void(pg_status_t, std::string_view)> fn) {
    using Callback = std::function<void(pg_status_t, std::string_view)>;
    auto owned = std::make_unique<Callback>(std::move(fn));
    const pg_status_t s = pg_work_on_complete(
        work_,
        [](pg_status_t status, void* user) noexcept {
          std::unique_ptr<Callback> callback(static_cast<Callback*>(user));
          (*callback)(status, status == PG_OK ? std::string_view() : pg_last_error());
        },
        owned.get());
    check(s);
    (void)owned.release();  // the callback owns it now
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

  // In place on data.
  Work allreduce(Buffer data, ReduceOp op = ReduceOp::kSum, const Options& options = {}) const {
    return run(pg_allreduce, nullptr, &data.c_buffer(), c_options(options, op));
  }
  Work allreduce(ConstBuffer in, Buffer out, ReduceOp op = ReduceOp::kSum,
                 const Options& options = {}) const {
    return run(pg_allreduce, in.c_pointer(), out.c_pointer(), c_options(options, op));
  }
  Work broadcast(Buffer data, int root, const Options& options = {}) const {
    return run(pg_broadcast, nullptr, &data.c_buffer(), c_options(options, ReduceOp::kSum, root));
  }
  // out is only written on root (may be empty elsewhere).
  Work reduce(ConstBuffer in, Buffer out, int root, ReduceOp op = ReduceOp::kSum,
              const Options& options = {}) const {
    return run(pg_reduce, in.c_pointer(), out.c_pointer(), c_options(options, op, root));
  }
  Work allgather(ConstBuffer in, Buffer out, const Options& options = {}) const {
    return run(pg_allgather, in.c_pointer(), out.c_pointer(), c_options(options));
  }
  Work reduce_scatter(ConstBuffer in, Buffer out, ReduceOp op = ReduceOp::kSum,
                      const Options& options = {}) const {
    return run(pg_reduce_scatter, in.c_pointer(), out.c_pointer(), c_options(options, op));
  }
  Work gather(ConstBuffer in, Buffer out, int root, const Options& options = {}) const {
    return run(pg_gather, in.c_pointer(), out.c_pointer(),
               c_options(options, ReduceOp::kSum, root));
  }
  Work scatter(ConstBuffer in, Buffer out, int root, const Options& options = {}) const {
    return run(pg_scatter, in.c_pointer(), out.c_pointer(),
               c_options(options, ReduceOp::kSum, root));
  }
  Work alltoall(ConstBuffer in, Buffer out, const Options& options = {}) const {
    return run(pg_alltoall, in.c_pointer(), out.c_pointer(), c_options(options));
  }
  Work barrier(const Options& options = {}) const {
    pg_work_t work = nullptr;
    pg_op_options_t o = c_options(options);
    check(pg_barrier(group_, &o, &work));
    return Work(work);
  }
  Work send(ConstBuffer data, int peer, int tag = 0, const Options& options = {}) const {
    pg_op_options_t o = c_options(options, ReduceOp::kSum, 0, peer, tag);
    pg_work_t work = nullptr;
    check(pg_send(group_, &data.c_buffer(), &o, &work));
    return Work(work);
  }
  Work recv(Buffer data, int peer, int tag = 0, const Options& options = {}) const {
    pg_op_options_t o = c_options(options, ReduceOp::kSum, 0, peer, tag);
    pg_work_t work = nullptr;
    check(pg_recv(group_, &data.c_buffer(), &o, &work));
    return Work(work);
  }

 private:
  explicit Group(const pg_group_options_t* options) { check(pg_group_create(options, &group_)); }

  static pg_op_options_t c_options(const Options& options, ReduceOp op = ReduceOp::kSum,
                                   int root = 0, int peer = 0, int tag = 0) {
    return op_options(op, root, peer, tag, options.timeout);
  }

  pg_group_t group_ = nullptr;
};

}  // namespace procgroup

#endif  // C++20
