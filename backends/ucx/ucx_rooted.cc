// Rooted collectives: broadcast and reduce (binomial trees for small messages, one pipelined
// chain for large ones), gather and scatter (see ucx_algorithms.h), and the confirmation
// that tells a broadcast's or scatter's root that every rank received what it sent.
#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>
#include <vector>

#include "ucx_algorithms.h"
#include "ucx_group.h"
#include "ucx_io.h"
#include "ucx_op.h"

namespace procgroup::ucx_backend {
namespace {

// Ranks relative to the root: virtual rank v is real rank (v + root) % p.
int virtual_rank(const Op& op) { return (op.rank - op.desc.root + op.size) % op.size; }
int real_rank(const Op& op, int v) { return (v + op.desc.root) % op.size; }

int bit_index(int mask) { return std::countr_zero(static_cast<unsigned>(mask)); }

// W receives in flight, each in its own Io so they complete (and are handled) in order.
struct Window {
  explicit Window(Op& op) : size(op.group->tuning().window) {
    for (int k = 0; k < size; ++k) slots.push_back(std::make_unique<Io>(op));
  }
  Io& operator[](uint64_t i) { return *slots[i % size]; }
  int size;
  std::vector<std::unique_ptr<Io>> slots;
};

// Sends bytes to peer in chunks, at most `window` of them in flight (step 0), so the head
// of a chain never floods the next rank's shared-memory FIFO with requests.
Task send_windowed(Op& op, int peer, const std::byte* data, size_t chunk_bytes, size_t bytes) {
  Window w(op);
  const uint64_t chunks = (bytes + chunk_bytes - 1) / chunk_bytes;
  for (uint64_t c = 0; c < chunks; ++c) {
    Io& slot = w[c];
    PG_KIT_CO_TRY(co_await slot);  // the send window[c] held before is done
    slot.send(peer, data + c * chunk_bytes, std::min(chunk_bytes, bytes - c * chunk_bytes), 0);
  }
  for (int k = 0; k < w.size; ++k) {
    Io& slot = *w.slots[k];
    PG_KIT_CO_TRY(co_await slot);
  }
  co_return Status{};
}

}  // namespace

// ---- Broadcast ---------------------------------------------------------------------------

Task broadcast_binomial(Op& op) {
  const int p = op.size, v = virtual_rank(op);
  const size_t bytes = op.plan.bytes();
  const bool root = v == 0;
  std::byte* out = op.plan.out;
  // The root sends from its input; it copies into its output meanwhile.
  const std::byte* data = root ? op.plan.in : out;
  int mask = 1;
  for (; mask < p; mask <<= 1) {
    if ((v & mask) != 0) {
      Io io(op);
      io.recv(real_rank(op, v - mask), out, bytes, bit_index(mask));
      PG_KIT_CO_TRY(co_await io);
      break;
    }
  }
  Io sends(op);
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (v + mask < p) sends.send(real_rank(op, v + mask), data, bytes, bit_index(mask));
  }
  if (root && !op.plan.in_place) std::memcpy(out, op.plan.in, bytes);
  co_return co_await sends;
}

// ---- Reduce ------------------------------------------------------------------------------

Task reduce_binomial(Op& op) {
  const int p = op.size, v = virtual_rank(op);
  const size_t bytes = op.plan.bytes();
  const uint64_t n = op.plan.n;
  // acc starts as our input and becomes a buffer of ours at the first reduction (the
  // root's output, scratch elsewhere), so a leaf sends its input untouched.
  const std::byte* acc = op.plan.in;
  std::byte* own = v == 0 ? op.plan.out : nullptr;
  std::byte* tmp = nullptr;
  for (int mask = 1; mask < p; mask <<= 1) {
    Io io(op);
    if ((v & mask) != 0) {
      io.send(real_rank(op, v - mask), acc, bytes, bit_index(mask));
      co_return co_await io;
    }
    if (v + mask >= p) continue;
    if (tmp == nullptr) tmp = op.scratch(bytes);
    if (own == nullptr) own = op.scratch(bytes);
    io.recv(real_rank(op, v + mask), tmp, bytes, bit_index(mask));
    PG_KIT_CO_TRY(co_await io);
    PG_KIT_CO_TRY(op.combine(own, acc, tmp, n));
    acc = own;
  }
  if (acc != op.plan.out) std::memcpy(op.plan.out, acc, bytes);
  co_return op.finish_avg(op.plan.out, n);
}

// ---- Pipelined chains ---------------------------------------------------------------------

// Broadcast data flows from the root (virtual rank 0) up to virtual rank p-1, a reduce's
// partial results from p-1 down to the root, chunk by chunk: the rank at the start sends
// its input, every other one forwards each chunk as it arrives (a reduce's combined with its
// own input first).
Task chain(Op& op) {
  const bool reducing = op.desc.op == PG_OP_REDUCE;
  const int p = op.size, v = virtual_rank(op);
  const size_t es = op.es();
  const uint64_t chunk = std::max<uint64_t>(1, op.group->tuning().chunk_bytes / es);
  const uint64_t n = op.plan.n, chunks = (n + chunk - 1) / chunk;
  auto count = [&](uint64_t c) { return std::min(chunk, n - c * chunk); };
  const int hop = reducing ? -1 : 1;  // toward the chain's end, in virtual ranks
  const int next = v + hop >= 0 && v + hop < p ? real_rank(op, v + hop) : -1;
  const std::byte* in = op.plan.in;
  if (v == (reducing ? p - 1 : 0)) {
    if (!reducing && !op.plan.in_place) std::memcpy(op.plan.out, in, n * es);
    co_return co_await send_windowed(op, next, in, chunk * es, n * es);
  }
  Io sends(op);
  const int prev = real_rank(op, v - hop);
  // Where chunks end up: the output, but a reduce's partial results outside the root.
  std::byte* acc = reducing && v != 0 ? op.scratch(n * es) : op.plan.out;
  Window w(op);
  // A reduce's chunks are combined as UCX unpacks them (fused), or land in tmp first.
  const bool fused = reducing && op.group->tuning().fused_recv;
  std::vector<ReduceInto> targets(fused ? w.size : 0);
  std::byte* tmp =
      reducing && !fused ? op.scratch(static_cast<size_t>(w.size) * chunk * es) : nullptr;
  auto slot = [&](uint64_t c) { return tmp + (c % w.size) * chunk * es; };
  auto post = [&](uint64_t c) {
    if (!fused) return w[c].recv(prev, reducing ? slot(c) : acc + c * chunk * es, count(c) * es, 0);
    ReduceInto& t = targets[c % w.size];
    t = op.reduce_into(acc + c * chunk * es, in + c * chunk * es, count(c) * es);
    w[c].recv_reduce(prev, &t, 0);
  };
  for (uint64_t c = 0; c < std::min<uint64_t>(chunks, w.size); ++c) post(c);
  for (uint64_t c = 0; c < chunks; ++c) {
    Io& arrived = w[c];  // a named lvalue: GCC 12 would copy the awaiter otherwise
    PG_KIT_CO_TRY(co_await arrived);
    std::byte* into = acc + c * chunk * es;
    if (fused) {
      PG_KIT_CO_TRY(targets[c % w.size].failure);
    } else if (reducing) {
      PG_KIT_CO_TRY(op.combine(into, in + c * chunk * es, slot(c), count(c)));
    }
    if (c + w.size < chunks) post(c + w.size);
    if (next >= 0) {
      sends.send(next, into, count(c) * es, 0);
    } else if (reducing) {
      PG_KIT_CO_TRY(op.finish_avg(into, count(c)));  // the root: every chunk is complete
    }
  }
  co_return co_await sends;
}

// ---- Gather and scatter: every message posted at once -------------------------------------

// Mirror images: the root receives (gather) or sends (scatter) one block per other rank, and
// every other rank sends or receives its one block.
Task gather_scatter_linear(Op& op) {
  const bool gather = op.desc.op == PG_OP_GATHER, root = op.rank == op.desc.root;
  const size_t bytes = op.plan.bytes();
  Io io(op);
  // offset: where the block is in the root's buffer of blocks (gather's out, scatter's in).
  auto transfer = [&](int peer, size_t offset) {
    if (gather == root) {
      io.recv(peer, op.plan.out + offset, bytes, 0);
    } else {
      io.send(peer, op.plan.in + offset, bytes, 0);
    }
  };
  if (!root) transfer(op.desc.root, 0);
  for (int i = 0; root && i < op.size; ++i) {
    if (i != op.rank) transfer(i, i * bytes);
  }
  if (root && !op.plan.in_place) {  // the root's own block
    const size_t own = op.rank * bytes;
    std::memcpy(op.plan.out + (gather ? own : 0), op.plan.in + (gather ? 0 : own), bytes);
  }
  co_return co_await io;
}

// ---- Confirmation -------------------------------------------------------------------------

Task confirmed_by_receivers(Op& op, Task inner) {
  const bool root = op.rank == op.desc.root;
  Io confirms(op);
  if (root) {
    // Posted first: a rank that thinks it is the root sends its data here instead.
    for (int r = 0; r < op.size; ++r) {
      if (r != op.rank) confirms.recv_confirm(r);
    }
  }
  PG_KIT_CO_TRY(co_await inner);
  if (!root) confirms.send_confirm(op.desc.root);
  co_return co_await confirms;
}

}  // namespace procgroup::ucx_backend
