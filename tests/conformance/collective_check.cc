#include "collective_check.h"

#include <fmt/format.h>

#include <memory>
#include <vector>

#include "collectives/reduce.h"
#include "common/dtype.h"
#include "reference.h"

namespace pgtest {
namespace {
using procgroup::detail::dtype_name;
using procgroup::detail::dtype_size;
using procgroup::detail::op_name;
using procgroup::detail::reduce_op_name;

bool input_is_block(pg_op_t op) {
  return op == PG_OP_REDUCE_SCATTER || op == PG_OP_SCATTER || op == PG_OP_ALLTOALL;
}
bool output_is_block(pg_op_t op) {
  return op == PG_OP_ALLGATHER || op == PG_OP_GATHER || op == PG_OP_ALLTOALL;
}

class Check final : public PendingCheck {
 public:
  Check(int rank, int size, const CollectiveCase& c) : rank_(rank), size_(size), c_(c) {}

  std::string start(pg_group_t group) {
    const uint64_t n = c_.n, world = static_cast<uint64_t>(size_);
    const bool is_root = c_.root == rank_;
    const pg_op_t op = c_.op;
    // The rank's contribution: scatter's comes from root only.
    const int source = op == PG_OP_SCATTER || op == PG_OP_BROADCAST ? c_.root : rank_;
    std::vector<double> in_values(input_is_block(op) ? world * n : n);
    for (uint64_t i = 0; i < in_values.size(); ++i)
      in_values[i] = input_value(source, i, c_.redop);
    uint64_t out_count = output_is_block(op) ? world * n : n;
    has_output_ = !((op == PG_OP_REDUCE || op == PG_OP_GATHER) && !is_root);
    bool has_input = !(op == PG_OP_SCATTER && !is_root) && !(op == PG_OP_BROADCAST && !is_root);

    input_ = encode(c_.dtype, in_values);
    output_ = encode(c_.dtype, std::vector<double>(out_count, 99.0));  // poison
    const uint64_t es = dtype_size(c_.dtype);
    pg_buffer_t in = pg_buffer_cpu(input_.data(), in_values.size(), c_.dtype);
    pg_buffer_t out = pg_buffer_cpu(output_.data(), out_count, c_.dtype);
    const pg_buffer_t* in_arg = has_input ? &in : nullptr;
    const pg_buffer_t* out_arg = has_output_ ? &out : nullptr;
    if (c_.in_place) {
      switch (op) {
        case PG_OP_ALLREDUCE:
        case PG_OP_BROADCAST:
        case PG_OP_ALLTOALL:
        case PG_OP_REDUCE:
          if (has_output_ && has_input) {
            output_ = input_;
            out.data = output_.data();
            in_arg = nullptr;
          }
          break;
        case PG_OP_ALLGATHER:
        case PG_OP_GATHER:
          if (has_output_) {
            std::copy(input_.begin(), input_.end(), output_.begin() + rank_ * n * es);
            in_arg = nullptr;
          }
          break;
        case PG_OP_REDUCE_SCATTER:
        case PG_OP_SCATTER:
          if (has_input) {
            in_place_output_ = true;
            out.data = input_.data() + rank_ * n * es;
          }
          break;
        default: break;
      }
    }
    pg_op_options_t o = PG_OP_OPTIONS_INIT;
    o.reduce_op = c_.redop;
    o.root = c_.root;
    pg_status_t (*fn)(pg_group_t, const pg_buffer_t*, const pg_buffer_t*,
                      const pg_op_options_t*, pg_work_t*) = nullptr;
    switch (op) {
      case PG_OP_ALLREDUCE: fn = pg_allreduce; break;
      case PG_OP_BROADCAST: fn = pg_broadcast; break;
      case PG_OP_REDUCE: fn = pg_reduce; break;
      case PG_OP_ALLGATHER: fn = pg_allgather; break;
      case PG_OP_REDUCE_SCATTER: fn = pg_reduce_scatter; break;
      case PG_OP_GATHER: fn = pg_gather; break;
      case PG_OP_SCATTER: fn = pg_scatter; break;
      case PG_OP_ALLTOALL: fn = pg_alltoall; break;
      default: return "unsupported op in test";
    }
    pg_status_t s = fn(group, in_arg, out_arg, &o, &work);
    if (s != PG_OK) return fmt::format("submit: {}: {}", pg_status_name(s), pg_last_error());
    return "";
  }

  std::string verify() override {
    if (!has_output_) return "";
    const uint64_t n = c_.n;
    const std::vector<uint8_t>& out = in_place_output_ ? input_ : output_;
    const uint64_t offset = in_place_output_ ? rank_ * n : 0;
    const uint64_t count = output_is_block(c_.op) ? size_ * n : n;
    for (uint64_t i = 0; i < count; ++i) {
      double got = decode(c_.dtype, out, offset + i);
      double want = expected_value(c_.op, c_.redop, c_.dtype, rank_, size_, c_.root, n, i);
      if (!close_enough(c_.dtype, c_.redop, got, want))
        return fmt::format("rank {}: element {} is {} but should be {}", rank_, i, got, want);
    }
    return "";
  }

 private:
  int rank_, size_;
  CollectiveCase c_;
  bool has_output_ = true;
  bool in_place_output_ = false;
  std::vector<uint8_t> input_, output_;
};

}  // namespace

std::string CollectiveCase::to_string() const {
  return fmt::format("{}({} x {}, {}, root {}{})", op_name(op), dtype_name(dtype), n,
                     reduce_op_name(redop), root, in_place ? ", in place" : "");
}

PendingCheck* start_case(pg_group_t group, int rank, int size, const CollectiveCase& c,
                         std::string* error) {
  auto check = std::make_unique<Check>(rank, size, c);
  *error = check->start(group);
  if (!error->empty()) return nullptr;
  return check.release();
}

std::string run_case(pg_group_t group, int rank, int size, const CollectiveCase& c) {
  std::string error;
  std::unique_ptr<PendingCheck> check(start_case(group, rank, size, c, &error));
  if (!check) return c.to_string() + ": " + error;
  pg_status_t s = pg_work_wait(check->work, -1);
  std::string result;
  if (s != PG_OK)
    result = fmt::format("{}: wait: {}: {}", c.to_string(), pg_status_name(s), pg_last_error());
  else if (std::string bad = check->verify(); !bad.empty())
    result = c.to_string() + ": " + bad;
  pg_work_release(check->work);
  return result;
}

}  // namespace pgtest
