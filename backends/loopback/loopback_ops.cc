// Collectives: what each rank contributes (its desc), the cross-rank agreement check, and
// the computation each rank does by reading its peers' buffers directly.
#include <cstring>
#include <new>
#include <string>

#include "loopback_group.h"

namespace procgroup::loopback {

OpDesc collective_desc(const pg_backend_op_t& op, const kit::Plan& plan) {
  const kit::OpInfo& info = kit::op_info(op.op);
  return {.op = op.op,
          .reduce_op = info.reducing ? op.reduce_op : PG_REDUCE_SUM,
          .root = info.rooted ? op.root : 0,
          .seq = op.seq,
          .plan = plan};
}

std::string describe(const OpDesc& d) {
  const std::string args =
      d.op == PG_OP_BARRIER ? ""
                            : kit::describe_args(d.op, d.plan.dtype, d.plan.n, d.reduce_op, d.root);
  return std::string(kit::op_name(d.op)) + "(" + args + ")";
}

Status check_agreement(std::span<const OpDesc> all) {
  const OpDesc& ref = all[0];
  for (size_t r = 1; r < all.size(); ++r) {
    const OpDesc& d = all[r];
    bool same = d.op == ref.op;
    if (same && d.op != PG_OP_BARRIER) {
      same = d.plan.n == ref.plan.n && d.plan.dtype == ref.plan.dtype && d.root == ref.root &&
             d.reduce_op == ref.reduce_op;
    }
    if (!same) {
      return {PG_ERR_MISMATCH, "rank " + std::to_string(r) + " called " + describe(d) + " as op #" +
                                   std::to_string(d.seq) + " while rank 0 called " + describe(ref)};
    }
  }
  return {};
}

namespace {

// target = in[0] (op) in[1] (op) ... in rank order, so every rank gets the same bits.
Status reduce_in_order(const pg_host_services_t* host, std::byte* target,
                       std::span<const OpDesc> all, uint64_t offset, const OpDesc& me) {
  const kit::Plan& p = me.plan;
  if (p.bytes() == 0) return {};
  if (all.size() == 1) std::memcpy(target, all[0].plan.in + offset, p.bytes());
  for (size_t r = 1; r < all.size(); ++r) {
    const std::byte* left = r == 1 ? all[0].plan.in + offset : target;
    PG_KIT_TRY(kit::reduce_to(host, target, left, all[r].plan.in + offset, p.n, p.dtype,
                              me.reduce_op));  // AVG as SUM
  }
  return me.reduce_op == PG_REDUCE_AVG ? kit::scale_down(host, target, p.n, p.dtype, all.size())
                                       : Status{};
}

void copy(std::byte* dst, const std::byte* src, uint64_t bytes) {
  if (bytes != 0 && dst != src) std::memcpy(dst, src, bytes);
}

}  // namespace

Status compute_collective(const pg_host_services_t* host, int rank, std::span<const OpDesc> all,
                          std::vector<std::byte>* temp) {
  const OpDesc& me = all[rank];
  const kit::Plan& p = me.plan;
  const uint64_t block = p.bytes();
  const uint64_t size = all.size();
  const bool is_root = me.root == rank;
  const std::byte* root_in = all[me.root].plan.in;
  // In place, peers may still read what our result would overwrite: use a temporary.
  auto target = [&](uint64_t bytes) -> std::byte* {
    if (!p.in_place) return p.out;
    temp->resize(bytes);
    return temp->data();
  };
  try {
    switch (me.op) {
      case PG_OP_ALLREDUCE: return reduce_in_order(host, target(block), all, 0, me);
      case PG_OP_REDUCE:
        return is_root ? reduce_in_order(host, target(block), all, 0, me) : Status{};
      case PG_OP_REDUCE_SCATTER: return reduce_in_order(host, target(block), all, rank * block, me);
      case PG_OP_BROADCAST: copy(p.out, root_in, block); return {};
      case PG_OP_ALLGATHER:
      case PG_OP_GATHER:
        if (me.op == PG_OP_ALLGATHER || is_root) {
          for (uint64_t r = 0; r < size; ++r) copy(p.out + r * block, all[r].plan.in, block);
        }
        return {};
      case PG_OP_SCATTER: copy(p.out, root_in + rank * block, block); return {};
      case PG_OP_ALLTOALL: {
        std::byte* out = target(size * block);
        for (uint64_t r = 0; r < size; ++r) {
          copy(out + r * block, all[r].plan.in + rank * block, block);
        }
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
