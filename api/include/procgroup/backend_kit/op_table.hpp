// backend_kit/op_table.hpp — the one table of operation properties. Everything that
// depends on which operation it is (names, the plugin table slot, rooted or reducing, which
// ranks pass which buffer, how many blocks of n elements each buffer holds) reads it here,
// in the core and in plugins alike, instead of a switch of its own.
//
//   const procgroup::kit::OpInfo& info = procgroup::kit::op_info(op.op);
//   if (info.reducing) ...;                       // allreduce, reduce, reduce_scatter
//   pg_backend_op_fn fn = ops.*info.slot;         // the plugin's entry for it
//   uint64_t out_count = blocks(info.output_blocks, size) * n;
//
// Adding an operation: a pg_op_t value and a table entry in the two public headers, a row
// here, the core's fallback algorithm (if it can emulate it) and its C entry point.
#ifndef PROCGROUP_BACKEND_KIT_OP_TABLE_HPP_
#define PROCGROUP_BACKEND_KIT_OP_TABLE_HPP_

#include <cstddef>
#include <cstdint>
#include <string>

#include "procgroup/procgroup_backend.h"

namespace procgroup::kit {

// Which ranks pass a buffer of an operation.
enum class Ranks : uint8_t { kNone, kEvery, kRoot };
// How many blocks of n elements (n: the per-rank count) a buffer holds: 1 or size.
enum class Blocks : uint8_t { kOne, kWorld };

struct OpInfo {
  pg_op_t op;
  const char* name;
  pg_backend_op_fn pg_backend_ops_t::*slot;  // the plugin's table entry for this operation
  bool emulated;  // the core can build it over send/recv when the plugin lacks it
  bool rooted;    // has a root (options.root / op.root)
  bool reducing;  // takes a reduce op
  bool p2p;       // send/recv: a peer and a tag, no sequence number
  Ranks input;    // who reads an input buffer
  Ranks output;   // who writes an output buffer
  Blocks input_blocks;
  Blocks output_blocks;

  constexpr bool reads_input(bool is_root) const {
    return input == Ranks::kEvery || (input == Ranks::kRoot && is_root);
  }
  constexpr bool writes_output(bool is_root) const {
    return output == Ranks::kEvery || (output == Ranks::kRoot && is_root);
  }
  // reduce_scatter, scatter: in place, the output sits inside the input at rank*n.
  constexpr bool output_in_input() const {
    return input_blocks == Blocks::kWorld && output_blocks == Blocks::kOne;
  }
  // Every other operation with both buffers: in place, the input may be left out and is
  // read from the output (at rank*n for allgather and gather, else at its start).
  constexpr bool input_in_output() const {
    return input != Ranks::kNone && output != Ranks::kNone && !output_in_input();
  }
  // Where the in-place input (or output) sits, in blocks of n: rank for allgather,
  // gather, reduce_scatter and scatter, else 0.
  constexpr bool in_place_at_rank() const { return input_blocks != output_blocks; }
};

namespace detail {
using R = Ranks;
using B = Blocks;
using Ops = pg_backend_ops_t;
}  // namespace detail

// Indexed by pg_op_t.
inline constexpr OpInfo kOps[PG_OP_COUNT_] = {
    // op, name, slot, emulated, rooted, reducing, p2p, input, output, in blocks, out blocks
    {PG_OP_ALLREDUCE, "allreduce", &detail::Ops::allreduce, true, false, true, false,
     detail::R::kEvery, detail::R::kEvery, detail::B::kOne, detail::B::kOne},
    {PG_OP_BROADCAST, "broadcast", &detail::Ops::broadcast, true, true, false, false,
     detail::R::kRoot, detail::R::kEvery, detail::B::kOne, detail::B::kOne},
    {PG_OP_REDUCE, "reduce", &detail::Ops::reduce, true, true, true, false, detail::R::kEvery,
     detail::R::kRoot, detail::B::kOne, detail::B::kOne},
    {PG_OP_ALLGATHER, "allgather", &detail::Ops::allgather, true, false, false, false,
     detail::R::kEvery, detail::R::kEvery, detail::B::kOne, detail::B::kWorld},
    {PG_OP_REDUCE_SCATTER, "reduce_scatter", &detail::Ops::reduce_scatter, true, false, true, false,
     detail::R::kEvery, detail::R::kEvery, detail::B::kWorld, detail::B::kOne},
    {PG_OP_GATHER, "gather", &detail::Ops::gather, true, true, false, false, detail::R::kEvery,
     detail::R::kRoot, detail::B::kOne, detail::B::kWorld},
    {PG_OP_SCATTER, "scatter", &detail::Ops::scatter, true, true, false, false, detail::R::kRoot,
     detail::R::kEvery, detail::B::kWorld, detail::B::kOne},
    {PG_OP_ALLTOALL, "alltoall", &detail::Ops::alltoall, true, false, false, false,
     detail::R::kEvery, detail::R::kEvery, detail::B::kWorld, detail::B::kWorld},
    {PG_OP_BARRIER, "barrier", &detail::Ops::barrier, true, false, false, false, detail::R::kNone,
     detail::R::kNone, detail::B::kOne, detail::B::kOne},
    {PG_OP_SEND, "send", &detail::Ops::send, false, false, false, true, detail::R::kEvery,
     detail::R::kNone, detail::B::kOne, detail::B::kOne},
    {PG_OP_RECV, "recv", &detail::Ops::recv, false, false, false, true, detail::R::kNone,
     detail::R::kEvery, detail::B::kOne, detail::B::kOne},
};

constexpr bool ops_indexed_by_op() {
  for (int i = 0; i < PG_OP_COUNT_; ++i) {
    if (kOps[i].op != i) return false;
  }
  return true;
}
static_assert(ops_indexed_by_op(), "kOps must be indexed by pg_op_t");

// What op_info gives for a value outside pg_op_t: no slot, no buffers, name "invalid".
inline constexpr OpInfo kInvalidOp = {PG_OP_COUNT_, "invalid",    nullptr,     false,
                                      false,        false,        false,       Ranks::kNone,
                                      Ranks::kNone, Blocks::kOne, Blocks::kOne};

constexpr bool op_valid(pg_op_t op) { return op >= 0 && op < PG_OP_COUNT_; }
constexpr const OpInfo& op_info(pg_op_t op) { return op_valid(op) ? kOps[op] : kInvalidOp; }
// "allreduce", "reduce_scatter", ...; "invalid" for anything else.
constexpr const char* op_name(pg_op_t op) { return op_info(op).name; }

// 1 or size: how many blocks of n elements a buffer holds.
constexpr uint64_t blocks(Blocks b, int size) {
  return b == Blocks::kWorld ? static_cast<uint64_t>(size) : 1u;
}

// The plugin's entry for op: NULL when it has none, when op is not an operation, or when
// the table's struct_size ends before the slot (an entry appended after the plugin was built).
inline pg_backend_op_fn table_entry(const pg_backend_ops_t& ops, pg_op_t op) {
  const OpInfo& info = op_info(op);
  if (info.slot == nullptr) return nullptr;
  const auto* base = reinterpret_cast<const char*>(&ops);
  const auto* slot = reinterpret_cast<const char*>(&(ops.*info.slot));
  if (static_cast<size_t>(slot - base) + sizeof(pg_backend_op_fn) > ops.struct_size) return nullptr;
  return ops.*info.slot;
}

// "allreduce #12": how messages name one operation.
inline std::string op_label(const pg_backend_op_t& op) {
  return std::string(op_name(op.op)) + " #" + std::to_string(op.seq);
}

}  // namespace procgroup::kit

#endif  // PROCGROUP_BACKEND_KIT_OP_TABLE_HPP_
