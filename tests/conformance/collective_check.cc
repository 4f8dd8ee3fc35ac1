#include "collective_check.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "cuda_staging.h"

namespace pgtest {
namespace {

constexpr uint8_t kGuardByte = 0xA5;
constexpr uint8_t kPoisonByte = 0x5B;  // 0x5B5B... decodes to an unlikely value in every dtype

bool has_bit(uint32_t mask, int bit) { return bit >= 0 && bit < 32 && ((mask >> bit) & 1u); }

using OpFn = pg_status_t (*)(pg_group_t, const pg_buffer_t*, const pg_buffer_t*,
                             const pg_op_options_t*, pg_work_t*);

OpFn function_for(pg_op_t op) {
  switch (op) {
    case PG_OP_ALLREDUCE: return pg_allreduce;
    case PG_OP_BROADCAST: return pg_broadcast;
    case PG_OP_REDUCE: return pg_reduce;
    case PG_OP_ALLGATHER: return pg_allgather;
    case PG_OP_REDUCE_SCATTER: return pg_reduce_scatter;
    case PG_OP_GATHER: return pg_gather;
    case PG_OP_SCATTER: return pg_scatter;
    case PG_OP_ALLTOALL: return pg_alltoall;
    default: return nullptr;
  }
}

class Check final : public PendingCheck {
 public:
  Check(int rank, int size, const CollectiveCase& c, Route route)
      : PendingCheck(c, route), rank_(rank), size_(size) {}

  // Lays out the buffers for the case's form and submits it.
  pg_status_t submit(pg_group_t group) {
    const CollectiveCase& c = case_;
    const uint64_t n = c.n, world = static_cast<uint64_t>(size_);
    const bool is_root = c.root == rank_;
    const bool in_place = c.in_place != InPlace::kNo;
    has_input_ = is_root || (c.op != PG_OP_SCATTER && c.op != PG_OP_BROADCAST);
    has_output_ = is_root || (c.op != PG_OP_REDUCE && c.op != PG_OP_GATHER);
    if (c.op == PG_OP_REDUCE && in_place)
      has_output_ = true;  // torch's reduce: in place everywhere
    const uint64_t in_count = input_is_blocked(c.op) ? world * n : n;
    const uint64_t out_count = output_is_blocked(c.op) ? world * n : n;
    const size_t es = dtype_size(c.dtype);

    if (has_input_) {
      input_ = std::make_unique<GuardedBuffer>(c.dtype, in_count);
      for (uint64_t i = 0; i < in_count; ++i)
        store_value(c.dtype, input_->data(), i, input_value(c, rank_, size_, i));
    }
    pg_buffer_t in = has_input_ ? pg_buffer_cpu(input_->data(), in_count, c.dtype) : pg_buffer_t{};
    pg_buffer_t out{};
    const pg_buffer_t* in_arg = has_input_ ? &in : nullptr;
    const pg_buffer_t* out_arg = nullptr;
    const bool blocked_in = c.op == PG_OP_REDUCE_SCATTER || c.op == PG_OP_SCATTER;
    const bool blocked_out = c.op == PG_OP_ALLGATHER || c.op == PG_OP_GATHER;
    if (in_place && has_input_ && blocked_in) {
      // The output is this rank's block of the input.
      output_in_input_ = true;
      out = pg_buffer_cpu(static_cast<char*>(input_->data()) + rank_ * n * es, n, c.dtype);
      out_arg = &out;
    } else if (in_place && has_input_ && has_output_ && !blocked_in && !blocked_out) {
      // allreduce, broadcast (root), reduce, alltoall: one buffer is input and output.
      out = in;
      out_arg = &out;
      output_is_input_ = true;
      if (c.in_place == InPlace::kNullInput) in_arg = nullptr;
    } else if (has_output_) {
      output_ = std::make_unique<GuardedBuffer>(c.dtype, out_count);
      output_->fill_poison();
      out = pg_buffer_cpu(output_->data(), out_count, c.dtype);
      out_arg = &out;
      if (in_place && blocked_out && has_input_) {
        // allgather/gather: the input already sits at output + rank * n.
        char* own = static_cast<char*>(output_->data()) + rank_ * n * es;
        std::memcpy(own, input_->data(), n * es);
        in.data = own;
        if (c.in_place == InPlace::kNullInput) in_arg = nullptr;
        input_.reset();
      }
    }
    if (input_ && !output_is_input_ && !output_in_input_) original_input_ = input_->snapshot();
    // Non-roots of an in-place reduce own no result: only the guards are checked there.
    check_values_ = has_output_ && !(c.op == PG_OP_REDUCE && !is_root);

    pg_op_options_t o = PG_OP_OPTIONS_INIT;
    o.reduce_op = c.redop;
    o.root = c.root;
    if (cuda_mode() && !stage(&in, &out)) return PG_ERR_INTERNAL;
    return function_for(c.op)(group, in_arg, out_arg, &o, &work_);
  }

  // CUDA mode: the host buffers, guards included, copied to the device; the arguments
  // pointed at the copies.
  bool stage(pg_buffer_t* in, pg_buffer_t* out) {
    const int device = cuda_device_for_rank();
    for (GuardedBuffer* g : {input_.get(), output_.get()}) {
      if (g == nullptr) continue;
      mirrors_.push_back(std::make_unique<DeviceMirror>(g->raw(), g->raw_size(), device));
      if (!mirrors_.back()->error().empty()) {
        staging_error_ = mirrors_.back()->error();
        return false;
      }
    }
    for (pg_buffer_t* b : {in, out}) {
      if (b->data == nullptr) continue;
      for (auto& m : mirrors_)
        if (m->contains(b->data)) b->data = m->translate(b->data);
      b->device_type = PG_DEVICE_CUDA;
      b->device_index = device;
    }
    return true;
  }
  const std::string& staging_error() const { return staging_error_; }

  std::string verify() override {
    const CollectiveCase& c = case_;
    const std::string where = "rank " + std::to_string(rank_) + ": ";
    for (auto& m : mirrors_)
      if (!m->download()) return where + m->error();
    if ((input_ && !input_->guards_intact()) || (output_ && !output_->guards_intact()))
      return where + "bytes just outside a buffer were overwritten";
    if (!original_input_.empty() && !input_->same_as(original_input_))
      return where + "the input buffer of an out-of-place operation was modified";
    if (!check_values_) return "";
    const void* base = output_ ? output_->data() : input_->data();
    const uint64_t offset = output_in_input_ ? rank_ * c.n : 0;
    const uint64_t count = output_is_blocked(c.op) ? size_ * c.n : c.n;
    uint64_t wrong = 0, first = 0;
    double first_got = 0;
    Expected first_want;
    for (uint64_t i = 0; i < count; ++i) {
      const double got = load_value(c.dtype, base, offset + i);
      const Expected want = expected_output(c, rank_, size_, i);
      if (matches(want, got)) continue;
      if (wrong++ > 0) continue;
      first = i;
      first_got = got;
      first_want = want;
    }
    if (wrong == 0) return "";
    std::string message = where + std::to_string(wrong) + " of " + std::to_string(count) +
                          " output elements wrong; first: element " + std::to_string(first) +
                          " is " + format_double(first_got) + " but should be " +
                          format_double(first_want.value);
    if (first_want.tolerance > 0) message += " (+- " + format_double(first_want.tolerance) + ")";
    return message;
  }

 private:
  static std::string format_double(double v) {
    char text[64];
    std::snprintf(text, sizeof(text), "%.17g", v);
    return text;
  }

  int rank_, size_;
  bool has_input_ = false, has_output_ = false, check_values_ = false;
  bool output_is_input_ = false, output_in_input_ = false;
  std::unique_ptr<GuardedBuffer> input_, output_;
  std::vector<uint8_t> original_input_;
  std::vector<std::unique_ptr<DeviceMirror>> mirrors_;  // CUDA mode only
  std::string staging_error_;
};

}  // namespace

Route route_for(const pg_capabilities_t& caps, pg_op_t op, pg_dtype_t dtype, pg_reduce_op_t redop) {
  if (cuda_mode()) {
    if (!has_bit(caps.devices, PG_DEVICE_CUDA)) return Route::kUnsupported;
    const bool p2p = op == PG_OP_SEND || op == PG_OP_RECV;
    const bool native = has_bit(caps.native_ops, op) &&
                        (p2p || op == PG_OP_BARRIER || has_bit(caps.native_dtypes, dtype)) &&
                        (!reduces(op) || has_bit(caps.native_reduce_ops, redop));
    return native ? Route::kNative : Route::kUnsupported;
  }
  if (!has_bit(caps.devices, PG_DEVICE_CPU)) return Route::kUnsupported;
  const bool p2p = op == PG_OP_SEND || op == PG_OP_RECV;
  const bool op_ok = has_bit(caps.native_ops, op);
  const bool dtype_ok = p2p || op == PG_OP_BARRIER || has_bit(caps.native_dtypes, dtype);
  if (op_ok && dtype_ok && (!reduces(op) || has_bit(caps.native_reduce_ops, redop)))
    return Route::kNative;
  if (op_ok && dtype_ok && reduces(op) && redop == PG_REDUCE_AVG &&
      has_bit(caps.native_reduce_ops, PG_REDUCE_SUM))
    return Route::kNativeSumThenScale;
  if (op == PG_OP_BARRIER && has_bit(caps.native_ops, PG_OP_ALLREDUCE) &&
      (caps.native_dtypes & ((1u << PG_DTYPE_U8) | (1u << PG_DTYPE_I32) | (1u << PG_DTYPE_F32) |
                             (1u << PG_DTYPE_I64))) != 0)
    return Route::kNative;  // a one-element allreduce
  if (!p2p && has_bit(caps.native_ops, PG_OP_SEND) && has_bit(caps.native_ops, PG_OP_RECV))
    return Route::kEmulated;
  return Route::kUnsupported;
}

const char* route_name(Route route) {
  switch (route) {
    case Route::kNative: return "native";
    case Route::kNativeSumThenScale: return "native sum, then scaled by the core";
    case Route::kEmulated: return "emulated by the core over send/recv";
    default: return "unsupported";
  }
}

GuardedBuffer::GuardedBuffer(pg_dtype_t dtype, uint64_t count)
    : dtype_(dtype), count_(count), bytes_(2 * kGuard + count * dtype_size(dtype), kGuardByte) {}

std::vector<uint8_t> GuardedBuffer::snapshot() const {
  const auto* begin = bytes_.data() + kGuard;
  return std::vector<uint8_t>(begin, begin + count_ * dtype_size(dtype_));
}

bool GuardedBuffer::same_as(const std::vector<uint8_t>& bytes) const {
  return bytes.size() == count_ * dtype_size(dtype_) &&
         std::memcmp(bytes_.data() + kGuard, bytes.data(), bytes.size()) == 0;
}

bool GuardedBuffer::guards_intact() const {
  const size_t tail = kGuard + count_ * dtype_size(dtype_);
  for (size_t i = 0; i < kGuard; ++i)
    if (bytes_[i] != kGuardByte || bytes_[tail + i] != kGuardByte) return false;
  return true;
}

void GuardedBuffer::fill_poison() {
  std::memset(bytes_.data() + kGuard, kPoisonByte, count_ * dtype_size(dtype_));
}

void PendingCheck::release_work() {
  pg_work_release(work_);
  work_ = nullptr;
}

std::unique_ptr<PendingCheck> start_case(pg_group_t group, int rank, int size,
                                         const pg_capabilities_t& caps, const CollectiveCase& c,
                                         std::string* error) {
  const Route route = route_for(caps, c.op, c.dtype, c.redop);
  auto check = std::make_unique<Check>(rank, size, c, route);
  const pg_status_t s = check->submit(group);
  error->clear();
  if (s == PG_OK) return check;
  if (!check->staging_error().empty()) {
    *error = "rank " + std::to_string(rank) + ": " + c.to_string() + ": " + check->staging_error();
    return nullptr;
  }
  if (s == PG_ERR_UNSUPPORTED && route == Route::kUnsupported) return nullptr;
  *error = "rank " + std::to_string(rank) + ": " + c.to_string() + " [" + route_name(route) +
           "]: submit: " + pg_status_name(s) + ": " + pg_last_error();
  return nullptr;
}

std::string run_case(pg_group_t group, int rank, int size, const pg_capabilities_t& caps,
                     const CollectiveCase& c) {
  std::string error;
  std::unique_ptr<PendingCheck> check = start_case(group, rank, size, caps, c, &error);
  if (!check) return error;
  const pg_status_t s = pg_work_wait(check->work(), -1);
  std::string result;
  if (s != PG_OK) {
    result = "rank " + std::to_string(rank) + ": " + c.to_string() + " [" +
             route_name(check->route()) + "]: wait: " + pg_status_name(s) + ": " + pg_last_error();
  } else if (std::string bad = check->verify(); !bad.empty()) {
    result = bad + " in " + c.to_string() + " [" + route_name(check->route()) + "]";
  }
  check->release_work();
  return result;
}

}  // namespace pgtest
