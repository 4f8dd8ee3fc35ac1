// One collective with reference data, started and checked (see ucx_cases.h).
#include "ucx_cases.h"

namespace procgroup::ucx_test {
namespace {

// Never an expected value: reductions stay within [-5, 21], payloads within [0, 249].
double poison(pg_dtype_t dtype) { return dtype == PG_DTYPE_U8 ? 251 : -7; }

bool block_input(pg_op_t op) {
  return op == PG_OP_REDUCE_SCATTER || op == PG_OP_SCATTER || op == PG_OP_ALLTOALL;
}
bool block_output(pg_op_t op) {
  return op == PG_OP_ALLGATHER || op == PG_OP_GATHER || op == PG_OP_ALLTOALL;
}
bool reducing(pg_op_t op) {
  return op == PG_OP_ALLREDUCE || op == PG_OP_REDUCE || op == PG_OP_REDUCE_SCATTER;
}

// What `rank` puts at element i of its whole input.
double input_value(const Case& c, int rank, uint64_t i) {
  return reducing(c.op) ? contribution(rank, i, c.redop, c.dtype) : payload(rank, i, c.dtype);
}

// Expected element i of `rank`'s output.
double expected(const Case& c, int rank, int size, uint64_t i) {
  const uint64_t n = c.n;
  switch (c.op) {
    case PG_OP_ALLREDUCE:
    case PG_OP_REDUCE: return reduced(size, i, c.redop, c.dtype);
    case PG_OP_REDUCE_SCATTER: return reduced(size, rank * n + i, c.redop, c.dtype);
    case PG_OP_BROADCAST: return payload(c.root, i, c.dtype);
    case PG_OP_ALLGATHER:
    case PG_OP_GATHER: return payload(static_cast<int>(i / n), i % n, c.dtype);
    case PG_OP_SCATTER: return payload(c.root, rank * n + i, c.dtype);
    case PG_OP_ALLTOALL: return payload(static_cast<int>(i / n), rank * n + i % n, c.dtype);
    default: return 0;
  }
}

}  // namespace

std::string Case::to_string() const {
  return std::string(op_label(op)) + "(" + dtype_label(dtype) + " x " + std::to_string(n) + ", " +
         reduce_label(redop) + ", root " + std::to_string(root) + (in_place ? ", in place)" : ")");
}

Pending start_case(RankEnv& env, const Case& c) {
  const int p = env.size, r = env.rank;
  const bool root = c.root == r;
  const uint64_t in_count = block_input(c.op) ? c.n * p : c.n;
  const uint64_t out_count = block_output(c.op) ? c.n * p : c.n;
  Pending pd;
  pd.c = c;
  const int source = c.op == PG_OP_SCATTER || c.op == PG_OP_BROADCAST ? c.root : r;
  const bool has_in = !((c.op == PG_OP_SCATTER || c.op == PG_OP_BROADCAST) && !root);
  const bool has_out = !((c.op == PG_OP_REDUCE || c.op == PG_OP_GATHER) && !root);
  pd.in = std::make_unique<Typed>(c.dtype, in_count);
  for (uint64_t i = 0; i < in_count; ++i) pd.in->set(i, input_value(c, source, i));
  pd.out = std::make_unique<Typed>(c.dtype, out_count);
  pd.out->fill(poison(c.dtype));
  pg_buffer_t in = has_in ? cpu(pd.in->data(), in_count, c.dtype) : absent();
  pg_buffer_t out = has_out ? cpu(pd.out->data(), out_count, c.dtype) : absent();
  if (c.in_place) {
    switch (c.op) {
      case PG_OP_ALLREDUCE:
      case PG_OP_BROADCAST:
      case PG_OP_ALLTOALL:
      case PG_OP_REDUCE:
        if (has_in) {  // the data starts in the output buffer
          for (uint64_t i = 0; i < in_count; ++i) pd.out->set(i, pd.in->get(i));
          out = cpu(pd.out->data(), in_count, c.dtype);
          in = absent();
        }
        break;
      case PG_OP_ALLGATHER:
      case PG_OP_GATHER:
        if (has_out) {
          for (uint64_t i = 0; i < c.n; ++i) pd.out->set(r * c.n + i, pd.in->get(i));
          in = absent();
        }
        break;
      case PG_OP_REDUCE_SCATTER:
      case PG_OP_SCATTER:
        if (has_in) {  // the result lands inside the input, at block rank
          pd.result_in_input = true;
          pd.out_offset = r * c.n;
          out = cpu(pd.in->at(r * c.n), c.n, c.dtype);
        }
        break;
      default: break;
    }
  }
  OpArgs a;
  a.reduce_op = c.redop;
  a.root = c.root;
  pd.work = env.start(make_op(c.op, in, out, a));
  return pd;
}

std::string finish_case(RankEnv& env, Pending& pd) {
  const Case& c = pd.c;
  const pg_status_t st = pd.work.wait();
  if (st != PG_OK) return c.to_string() + ": " + status_name(st) + ": " + pd.work.error();
  const bool has_out = !((c.op == PG_OP_REDUCE || c.op == PG_OP_GATHER) && c.root != env.rank);
  if (!has_out || c.op == PG_OP_BARRIER) return "";
  const Typed& result = pd.result_in_input ? *pd.in : *pd.out;
  const uint64_t count = block_output(c.op) ? c.n * env.size : c.n;
  for (uint64_t i = 0; i < count; ++i) {
    const double got = result.get(pd.out_offset + i);
    const double want = expected(c, env.rank, env.size, i);
    if (!matches(c.dtype, c.redop, got, want)) {
      return c.to_string() + ": rank " + std::to_string(env.rank) + " element " +
             std::to_string(i) + " is " + std::to_string(got) + ", want " + std::to_string(want);
    }
  }
  return "";
}

}  // namespace procgroup::ucx_test
