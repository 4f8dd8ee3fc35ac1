// Collectives: argument validation, in-place resolution, the cross-rank agreement check,
// and the computation each rank does by reading its peers' buffers directly.
#include <cstring>
#include <limits>
#include <new>
#include <string>

#include "loopback_group.h"

namespace procgroup::loopback {
namespace {

const char* dtype_name(pg_dtype_t dtype) {
  switch (dtype) {
    case PG_DTYPE_F32: return "f32";
    case PG_DTYPE_F64: return "f64";
    case PG_DTYPE_F16: return "f16";
    case PG_DTYPE_BF16: return "bf16";
    case PG_DTYPE_I8: return "i8";
    case PG_DTYPE_U8: return "u8";
    case PG_DTYPE_I32: return "i32";
    case PG_DTYPE_I64: return "i64";
    default: return "invalid";
  }
}

const char* reduce_name(pg_reduce_op_t op) {
  switch (op) {
    case PG_REDUCE_SUM: return "sum";
    case PG_REDUCE_AVG: return "avg";
    case PG_REDUCE_PROD: return "prod";
    case PG_REDUCE_MIN: return "min";
    case PG_REDUCE_MAX: return "max";
    default: return "invalid";
  }
}

bool is_rooted(pg_op_t op) {
  return op == PG_OP_BROADCAST || op == PG_OP_REDUCE || op == PG_OP_GATHER || op == PG_OP_SCATTER;
}

bool is_reducing(pg_op_t op) {
  return op == PG_OP_ALLREDUCE || op == PG_OP_REDUCE || op == PG_OP_REDUCE_SCATTER;
}

bool present(const pg_buffer_t& b) { return b.data != nullptr || b.count != 0; }

bool overlaps(const uint8_t* a, uint64_t a_bytes, const uint8_t* b, uint64_t b_bytes) {
  return a_bytes != 0 && b_bytes != 0 && a < b + b_bytes && b < a + a_bytes;
}

// Checks one buffer the operation uses; absent buffers (NULL, 0) pass.
Status check_buffer(const pg_buffer_t& b, const char* name, const char* op) {
  if (!present(b)) return {};
  std::string where = std::string(op) + ": " + name;
  if (b.struct_size < sizeof(pg_buffer_t)) {
    return {PG_ERR_INVALID_ARGUMENT, where + ".struct_size is " + std::to_string(b.struct_size)};
  }
  if (b.data == nullptr) {
    return {PG_ERR_INVALID_ARGUMENT,
            where + " has " + std::to_string(b.count) + " elements but a NULL data pointer"};
  }
  if (dtype_size(b.dtype) == 0) {
    return {PG_ERR_INVALID_ARGUMENT, where + " has invalid dtype " + std::to_string(b.dtype)};
  }
  if (b.device_type != PG_DEVICE_CPU) {
    return {PG_ERR_UNSUPPORTED, where + " is on device type " + std::to_string(b.device_type) +
                                    "; loopback handles CPU buffers only"};
  }
  if (b.count > std::numeric_limits<uint64_t>::max() / dtype_size(b.dtype)) {
    return {PG_ERR_INVALID_ARGUMENT, where + " count " + std::to_string(b.count) + " overflows"};
  }
  return {};
}

Status invalid(const char* op, const std::string& what) {
  return {PG_ERR_INVALID_ARGUMENT, std::string(op) + ": " + what};
}

uint8_t* bytes_of(const pg_buffer_t& b) { return static_cast<uint8_t*>(b.data); }

}  // namespace

uint64_t dtype_size(pg_dtype_t dtype) {
  switch (dtype) {
    case PG_DTYPE_F32:
    case PG_DTYPE_I32: return 4;
    case PG_DTYPE_F64:
    case PG_DTYPE_I64: return 8;
    case PG_DTYPE_F16:
    case PG_DTYPE_BF16: return 2;
    case PG_DTYPE_I8:
    case PG_DTYPE_U8: return 1;
    default: return 0;
  }
}

const char* op_name(pg_op_t op) {
  static const char* const kNames[] = {"allreduce",      "broadcast", "reduce",  "allgather",
                                       "reduce_scatter", "gather",    "scatter", "alltoall",
                                       "barrier",        "send",      "recv"};
  return op >= 0 && op < PG_OP_COUNT_ ? kNames[op] : "unknown op";
}

Status normalize_collective(const pg_backend_op_t& op, int rank, int size, OpDesc* d) {
  const char* name = op_name(op.op);
  d->op = op.op;
  d->seq = op.seq;
  d->root = is_rooted(op.op) ? op.root : 0;
  d->reduce_op = is_reducing(op.op) ? op.reduce_op : PG_REDUCE_SUM;
  if (op.op == PG_OP_BARRIER) return {};
  if (is_rooted(op.op) && (op.root < 0 || op.root >= size)) {
    return invalid(name, "root " + std::to_string(op.root) + " is not a rank of a group of size " +
                             std::to_string(size));
  }
  if (is_reducing(op.op) && (op.reduce_op < 0 || op.reduce_op >= PG_REDUCE_COUNT_)) {
    return invalid(name, "invalid reduce op " + std::to_string(op.reduce_op));
  }
  const bool is_root = op.root == rank;
  // Buffers this rank ignores (a non-root's broadcast/scatter input, reduce/gather output).
  const bool use_in = !((op.op == PG_OP_BROADCAST || op.op == PG_OP_SCATTER) && !is_root);
  const bool use_out = !((op.op == PG_OP_REDUCE || op.op == PG_OP_GATHER) && !is_root);
  const pg_buffer_t& in = op.input;
  const pg_buffer_t& out = op.output;
  const bool has_in = use_in && present(in);
  const bool has_out = use_out && present(out);
  if (use_in) {
    if (Status o = check_buffer(in, "input", name); !o.ok()) return o;
  }
  if (use_out) {
    if (Status o = check_buffer(out, "output", name); !o.ok()) return o;
  }
  if (has_in && has_out && in.dtype != out.dtype) {
    return invalid(name, std::string("input is ") + dtype_name(in.dtype) + " but output is " +
                             dtype_name(out.dtype));
  }
  d->dtype = has_out ? out.dtype : has_in ? in.dtype : PG_DTYPE_INVALID;
  d->esize = dtype_size(d->dtype);
  const uint64_t s = static_cast<uint64_t>(size);
  uint8_t* in_data = has_in ? bytes_of(in) : nullptr;
  uint8_t* out_data = has_out ? bytes_of(out) : nullptr;
  uint64_t in_count = has_in ? in.count : 0;
  uint64_t out_count = has_out ? out.count : 0;

  switch (op.op) {
    case PG_OP_ALLREDUCE:
    case PG_OP_BROADCAST:
    case PG_OP_REDUCE:
    case PG_OP_ALLTOALL: {
      // n elements in and out (alltoall: size*n); an absent input means in place.
      uint64_t total = use_out ? out_count : in_count;
      if (has_in && use_out && in_count != out_count) {
        return invalid(name, "input has " + std::to_string(in_count) + " elements, output " +
                                 std::to_string(out_count));
      }
      if (op.op == PG_OP_ALLTOALL && total % s != 0) {
        return invalid(name, "count " + std::to_string(total) + " is not a multiple of size " +
                                 std::to_string(size));
      }
      d->n = op.op == PG_OP_ALLTOALL ? total / s : total;
      d->dst = out_data;
      d->src = use_in ? (has_in ? in_data : out_data) : nullptr;
      d->in_place = d->src != nullptr && d->src == d->dst;
      if (!d->in_place && overlaps(in_data, in_count * d->esize, out_data, out_count * d->esize)) {
        return invalid(name, "input and output overlap without being the same buffer");
      }
      return {};
    }
    case PG_OP_ALLGATHER:
    case PG_OP_GATHER: {
      // Output holds size*n; this rank's n may already sit in it at rank*n (in place).
      if (!use_out) {
        d->n = in_count;
        d->src = in_data;
        return {};
      }
      d->n = has_in ? in_count : out_count / s;
      if (d->n > out_count / s || d->n * s != out_count) {
        return invalid(name, "output has " + std::to_string(out_count) + " elements, expected " +
                                 "size * n = " + std::to_string(size) + " * " +
                                 std::to_string(d->n));
      }
      const uint64_t block = d->n * d->esize;
      d->dst = out_data;
      uint8_t* slot = out_data == nullptr ? nullptr : out_data + rank * block;
      d->src = (!has_in || in_data == out_data) ? slot : in_data;
      d->in_place = d->src == slot;
      if (!d->in_place && overlaps(in_data, block, out_data, out_count * d->esize)) {
        return invalid(name, "input overlaps output; in place, input must be output + rank*n");
      }
      return {};
    }
    case PG_OP_REDUCE_SCATTER:
    case PG_OP_SCATTER: {
      // Input holds size*n; the result may be written into it at rank*n (in place).
      d->n = out_count;
      d->dst = out_data;
      if (!use_in) return {};
      if (d->n > in_count / s || in_count != d->n * s) {
        return invalid(name, "input has " + std::to_string(in_count) + " elements, expected " +
                                 "size * n = " + std::to_string(size) + " * " +
                                 std::to_string(d->n));
      }
      const uint64_t block = d->n * d->esize;
      d->src = in_data;
      d->in_place = in_data != nullptr && out_data == in_data + rank * block;
      if (!d->in_place && overlaps(in_data, in_count * d->esize, out_data, block)) {
        return invalid(name, "output overlaps input; in place, output must be input + rank*n");
      }
      return {};
    }
    default: return invalid(name, "not a collective (op " + std::to_string(op.op) + ")");
  }
}

std::string describe(const OpDesc& d) {
  std::string s = std::string(op_name(d.op)) + "(";
  if (d.op != PG_OP_BARRIER) {
    s += std::string(dtype_name(d.dtype)) + " x " + std::to_string(d.n);
    if (is_reducing(d.op)) s += std::string(", ") + reduce_name(d.reduce_op);
    if (is_rooted(d.op)) s += ", root " + std::to_string(d.root);
  }
  return s + ")";
}

std::string check_agreement(std::span<const OpDesc> all) {
  const OpDesc& ref = all[0];
  for (size_t r = 1; r < all.size(); ++r) {
    const OpDesc& d = all[r];
    bool same = d.op == ref.op;
    if (same && d.op != PG_OP_BARRIER) {
      // An absent buffer carries no dtype (e.g. zero elements): only a known one counts.
      bool dtype_known = d.dtype != PG_DTYPE_INVALID && ref.dtype != PG_DTYPE_INVALID;
      same = d.n == ref.n && (!dtype_known || d.dtype == ref.dtype) && d.root == ref.root &&
             d.reduce_op == ref.reduce_op;
    }
    if (!same) {
      return "rank " + std::to_string(r) + " called " + describe(d) + " as op #" +
             std::to_string(d.seq) + " while rank 0 called " + describe(ref);
    }
  }
  return {};
}

namespace {

// target = src[0] (op) src[1] (op) ... in rank order, so every rank gets the same bits.
Status reduce_in_order(const pg_host_services_t* host, uint8_t* target,
                        std::span<const OpDesc> all, uint64_t offset, const OpDesc& me) {
  const uint64_t bytes = me.n * me.esize;
  if (bytes == 0) return {};
  const pg_reduce_op_t op = me.reduce_op == PG_REDUCE_AVG ? PG_REDUCE_SUM : me.reduce_op;
  std::memcpy(target, all[0].src + offset, bytes);
  for (size_t r = 1; r < all.size(); ++r) {
    pg_status_t st = host->reduce(host->ctx, target, all[r].src + offset, me.n, me.dtype, op);
    if (st != PG_OK) {
      return {st, describe(me) + ": the host's reduce kernel failed for " +
                      std::string(dtype_name(me.dtype)) + " " + reduce_name(op)};
    }
  }
  if (me.reduce_op == PG_REDUCE_AVG) {
    pg_status_t st = host->scale_down(host->ctx, target, me.n, me.dtype, all.size());
    if (st != PG_OK) return {st, describe(me) + ": the host's scale_down kernel failed"};
  }
  return {};
}

void copy(uint8_t* dst, const uint8_t* src, uint64_t bytes) {
  if (bytes != 0 && dst != src) std::memcpy(dst, src, bytes);
}

}  // namespace

Status compute_collective(const pg_host_services_t* host, int rank, std::span<const OpDesc> all,
                           std::vector<uint8_t>* temp) {
  const OpDesc& me = all[rank];
  const uint64_t block = me.n * me.esize;
  const uint64_t size = all.size();
  const bool is_root = me.root == rank;
  // In place, peers may still read what our result would overwrite: use a temporary.
  auto target = [&](uint64_t bytes) -> uint8_t* {
    if (!me.in_place) return me.dst;
    temp->resize(bytes);
    return temp->data();
  };
  try {
    switch (me.op) {
      case PG_OP_ALLREDUCE: return reduce_in_order(host, target(block), all, 0, me);
      case PG_OP_REDUCE:
        return is_root ? reduce_in_order(host, target(block), all, 0, me) : Status{};
      case PG_OP_REDUCE_SCATTER: return reduce_in_order(host, target(block), all, rank * block, me);
      case PG_OP_BROADCAST: copy(me.dst, all[me.root].src, block); return {};
      case PG_OP_ALLGATHER:
      case PG_OP_GATHER:
        if (me.op == PG_OP_ALLGATHER || is_root) {
          for (uint64_t r = 0; r < size; ++r) copy(me.dst + r * block, all[r].src, block);
        }
        return {};
      case PG_OP_SCATTER: copy(me.dst, all[me.root].src + rank * block, block); return {};
      case PG_OP_ALLTOALL: {
        uint8_t* out = target(size * block);
        for (uint64_t r = 0; r < size; ++r) copy(out + r * block, all[r].src + rank * block, block);
        return {};
      }
      case PG_OP_BARRIER: return {};
      default:
        return {PG_ERR_INTERNAL, "loopback: compute_collective got op " + std::to_string(me.op)};
    }
  } catch (const std::bad_alloc&) {
    temp->clear();
    return {PG_ERR_OUT_OF_MEMORY, describe(me) + ": no memory for the in-place temporary"};
  }
}

}  // namespace procgroup::loopback
