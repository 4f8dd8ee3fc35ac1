// Allreduce algorithms, and the chunk-pipelined ring shared with reduce_scatter and
// allgather (see ucx_algorithms.h).
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "ucx_algorithms.h"
#include "ucx_group.h"
#include "ucx_io.h"
#include "ucx_op.h"

namespace procgroup::ucx_backend {
namespace {

// Non-power-of-two groups fold into the largest power of two pof2 <= p: of the first
// 2 * (p - pof2) ranks, each even one hands its vector to the odd one above it and waits
// for the result. Returns the rank among the pof2 (-1 for a rank that sits out).
struct Fold {
  int pof2;
  int rem;
  int newrank;
  int real(int v) const { return v < rem ? 2 * v + 1 : v + rem; }
};

int log2_of(int pof2) { return std::countr_zero(static_cast<unsigned>(pof2)); }

Fold fold_of(int rank, int size) {
  int pof2 = 1;
  while (pof2 * 2 <= size) pof2 *= 2;
  const int rem = size - pof2;
  int newrank = rank - rem;
  if (rank < 2 * rem) newrank = rank % 2 == 0 ? -1 : rank / 2;
  return Fold{pof2, rem, newrank};
}

// Folding in: an even low rank's whole vector goes to its odd neighbour.
Task fold_in(Op& op, const Fold& f, std::byte* data, std::byte* tmp) {
  const size_t bytes = op.plan.bytes();
  if (op.rank >= 2 * f.rem) co_return Status{};
  Io io(op);
  if (f.newrank < 0) {
    io.send(op.rank + 1, data, bytes, 0);
    co_return co_await io;
  }
  io.recv(op.rank - 1, tmp, bytes, 0);
  PG_KIT_CO_TRY(co_await io);
  co_return op.combine(data, tmp, data, op.plan.n);  // lower rank first, as below
}

// Folding out: the odd rank returns the finished vector.
Task fold_out(Op& op, const Fold& f, std::byte* data, uint64_t step) {
  if (op.rank >= 2 * f.rem) co_return Status{};
  Io io(op);
  if (f.newrank < 0) {
    io.recv(op.rank + 1, data, op.plan.bytes(), step);
  } else {
    io.send(op.rank - 1, data, op.plan.bytes(), step);
  }
  co_return co_await io;
}

// ---- The chunk-pipelined ring -----------------------------------------------------------
//
// Block b travels the ring. Reduce-scatter step s (0..p-2): send block r-s-1 to the right,
// receive block r-s-2 from the left and reduce it with our own contribution; after step
// p-2 we hold block r complete. Allgather step t (tag p-1+t): send block r-t, receive
// block r-t-1 into place. Each received chunk is reduced and immediately sent on, so the
// next hop works on chunk c while chunk c+1 is still arriving here.
struct Ring {
  struct Block {
    const std::byte* src;  // our contribution
    std::byte* dst;        // where its (partial) result goes
    uint64_t len;          // elements
  };
  std::vector<Block> blocks{};
  bool reduce_scatter = true;
  bool allgather = true;
};

Task run_ring(Op& op, Ring ring) {
  const int p = op.size, r = op.rank;
  const size_t es = op.es();
  const Tuning& t = op.group->tuning();
  const uint64_t chunk = std::max<uint64_t>(1, t.chunk_bytes / es);
  const int window = t.window;
  auto block = [&](int b) { return ((b % p) + p) % p; };
  auto chunks = [&](int b) { return (ring.blocks[b].len + chunk - 1) / chunk; };
  auto clen = [&](int b, uint64_t c) { return std::min(chunk, ring.blocks[b].len - c * chunk); };

  // The receives in order: (step, block, chunk).
  struct Event {
    int step;
    int block;
    uint64_t chunk;
  };
  std::vector<Event> events;
  const int first = ring.reduce_scatter ? 0 : p - 1;
  const int last = ring.allgather ? 2 * p - 3 : p - 2;
  for (int s = first; s <= last; ++s) {
    const int b = s < p - 1 ? block(r - s - 2) : block(r - (s - (p - 1)) - 1);
    for (uint64_t c = 0; c < chunks(b); ++c) events.push_back(Event{s, b, c});
  }

  Io sends(op);
  // Step `first` sends straight from our data: block r-1's contribution, or block r. They
  // go out at the pace we take in step-`first` chunks (and all before any later step), so
  // a large message never floods the peer's shared-memory FIFO with requests.
  const int b0 = ring.reduce_scatter ? block(r - 1) : r;
  const std::byte* from = ring.reduce_scatter ? ring.blocks[b0].src : ring.blocks[b0].dst;
  uint64_t initial_posted = 0;
  auto post_initial = [&](uint64_t upto) {
    for (; initial_posted < std::min(upto, chunks(b0)); ++initial_posted) {
      const uint64_t c = initial_posted;
      sends.send(op.right(), from + c * chunk * es, clen(b0, c) * es, first);
    }
  };
  const uint64_t ahead = 2 * static_cast<uint64_t>(window);
  post_initial(ahead);
  // Reduce-scatter chunks are combined as UCX unpacks them (fused), or land in tmp first.
  const bool fused = t.fused_recv;
  std::vector<std::unique_ptr<Io>> slots(window);
  std::vector<ReduceInto> targets(window);
  std::byte* tmp = ring.reduce_scatter && !fused ? op.scratch(window * chunk * es) : nullptr;
  for (auto& slot : slots) slot = std::make_unique<Io>(op);
  auto post = [&](size_t i) {
    if (i >= events.size()) return;
    const Event& e = events[i];
    const size_t k = i % window;
    const size_t bytes = clen(e.block, e.chunk) * es;
    std::byte* chunk_dst = ring.blocks[e.block].dst + e.chunk * chunk * es;
    if (e.step >= p - 1) {
      slots[k]->recv(op.left(), chunk_dst, bytes, e.step);
    } else if (fused) {
      targets[k] =
          op.reduce_into(chunk_dst, ring.blocks[e.block].src + e.chunk * chunk * es, bytes);
      slots[k]->recv_reduce(op.left(), &targets[k], e.step);
    } else {
      slots[k]->recv(op.left(), tmp + k * chunk * es, bytes, e.step);
    }
  };
  for (size_t i = 0; i < static_cast<size_t>(window); ++i) post(i);

  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    const size_t k = i % window;
    if (e.step != first) post_initial(UINT64_MAX);
    Io& slot = *slots[k];  // a named lvalue: GCC 12 would copy the awaiter otherwise
    PG_KIT_CO_TRY(co_await slot);
    const uint64_t n = clen(e.block, e.chunk);
    std::byte* chunk_dst = ring.blocks[e.block].dst + e.chunk * chunk * es;
    if (e.step < p - 1) {
      if (fused) {
        PG_KIT_CO_TRY(targets[k].failure);
      } else {
        const std::byte* mine = ring.blocks[e.block].src + e.chunk * chunk * es;
        PG_KIT_CO_TRY(op.combine(chunk_dst, mine, tmp + k * chunk * es, n));
      }
      if (e.step == p - 2) PG_KIT_CO_TRY(op.finish_avg(chunk_dst, n));  // our block is complete
    }
    post(i + window);  // the slot is free again
    // What every step but the last received goes on, as the next step's message.
    if (e.step < last) sends.send(op.right(), chunk_dst, n * es, e.step + 1);
    post_initial(i + 1 + ahead);
  }
  post_initial(UINT64_MAX);
  co_return co_await sends;
}

}  // namespace

// ---- Recursive doubling (small messages) --------------------------------------------------

Task allreduce_recursive_doubling(Op& op) {
  const size_t bytes = op.plan.bytes();
  std::byte* out = op.plan.out;
  if (!op.plan.in_place) std::memcpy(out, op.plan.in, bytes);
  std::byte* tmp = op.scratch(bytes);
  const Fold f = fold_of(op.rank, op.size);
  if (f.rem > 0) PG_KIT_CO_TRY(co_await fold_in(op, f, out, tmp));
  uint64_t step = 1;
  if (f.newrank >= 0) {
    for (int mask = 1; mask < f.pof2; mask <<= 1, ++step) {
      const int peer = f.real(f.newrank ^ mask);
      Io io(op);
      io.recv(peer, tmp, bytes, step);
      io.send(peer, out, bytes, step);
      PG_KIT_CO_TRY(co_await io);
      // Every rank combines in rank order, so all end with bit-identical results.
      PG_KIT_CO_TRY(peer < op.rank ? op.combine(out, tmp, out, op.plan.n)
                                   : op.combine(out, out, tmp, op.plan.n));
    }
  }
  // Ranks that sat out skipped the rounds: the fold-out step is counted, not accumulated.
  if (f.rem > 0) PG_KIT_CO_TRY(co_await fold_out(op, f, out, 1 + log2_of(f.pof2)));
  co_return op.finish_avg(out, op.plan.n);
}

// ---- Rabenseifner: recursive halving reduce-scatter + recursive doubling allgather -------

Task allreduce_rabenseifner(Op& op) {
  const size_t es = op.es();
  std::byte* out = op.plan.out;
  if (!op.plan.in_place) std::memcpy(out, op.plan.in, op.plan.bytes());
  const Fold f = fold_of(op.rank, op.size);
  std::byte* tmp = op.scratch(op.plan.bytes());
  PG_KIT_CO_TRY(co_await fold_in(op, f, out, tmp));
  uint64_t step = 1;
  if (f.newrank >= 0) {
    const Blocks blocks{op.plan.n, f.pof2};
    int lo = 0, hi = f.pof2;  // the blocks this rank is still responsible for
    for (int mask = f.pof2 / 2; mask >= 1; mask >>= 1, ++step) {
      const int peer = f.real(f.newrank ^ mask);
      const int mid = lo + (hi - lo) / 2;
      const bool lower = (f.newrank & mask) == 0;
      const int keep_lo = lower ? lo : mid, keep_hi = lower ? mid : hi;
      const int give_lo = lower ? mid : lo, give_hi = lower ? hi : mid;
      const uint64_t keep_off = blocks.off(keep_lo), keep_n = blocks.off(keep_hi) - keep_off;
      const uint64_t give_off = blocks.off(give_lo), give_n = blocks.off(give_hi) - give_off;
      Io io(op);
      io.recv(peer, tmp, keep_n * es, step);
      io.send(peer, out + give_off * es, give_n * es, step);
      PG_KIT_CO_TRY(co_await io);
      PG_KIT_CO_TRY(op.combine(out + keep_off * es, out + keep_off * es, tmp, keep_n));
      lo = keep_lo;
      hi = keep_hi;
    }
    // Block newrank is complete.
    PG_KIT_CO_TRY(op.finish_avg(out + blocks.off(lo) * es, blocks.len(lo)));
    for (int mask = 1; mask < f.pof2; mask <<= 1, ++step) {
      const int peer = f.real(f.newrank ^ mask);
      const int width = hi - lo;
      const bool lower = (f.newrank & mask) == 0;
      const int other_lo = lower ? hi : lo - width, other_hi = other_lo + width;
      const uint64_t mine_off = blocks.off(lo), mine_n = blocks.off(hi) - mine_off;
      const uint64_t other_off = blocks.off(other_lo), other_n = blocks.off(other_hi) - other_off;
      Io io(op);
      io.recv(peer, out + other_off * es, other_n * es, step);
      io.send(peer, out + mine_off * es, mine_n * es, step);
      PG_KIT_CO_TRY(co_await io);
      lo = std::min(lo, other_lo);
      hi = std::max(hi, other_hi);
    }
  }
  co_return co_await fold_out(op, f, out, 1 + 2 * log2_of(f.pof2));
}

// ---- Ring --------------------------------------------------------------------------------

Task allreduce_ring(Op& op) {
  const Blocks blocks{op.plan.n, op.size};
  const size_t es = op.es();
  Ring ring;
  for (int b = 0; b < op.size; ++b) {
    ring.blocks.push_back(
        {op.plan.in + blocks.off(b) * es, op.plan.out + blocks.off(b) * es, blocks.len(b)});
  }
  co_return co_await run_ring(op, std::move(ring));
}

Task reduce_scatter_ring(Op& op) {
  const int p = op.size;
  const size_t bytes = op.plan.bytes();
  // Partial sums of other ranks' blocks stay in scratch until forwarded.
  std::byte* acc = op.scratch(bytes * p);
  Ring ring{.allgather = false};
  for (int b = 0; b < p; ++b) {
    ring.blocks.push_back(
        {op.plan.in + b * bytes, b == op.rank ? op.plan.out : acc + b * bytes, op.plan.n});
  }
  co_return co_await run_ring(op, std::move(ring));
}

Task allgather_ring(Op& op) {
  const int p = op.size;
  const size_t bytes = op.plan.bytes();
  std::byte* mine = op.plan.out + op.rank * bytes;
  if (!op.plan.in_place) std::memcpy(mine, op.plan.in, bytes);
  Ring ring{.reduce_scatter = false};
  for (int b = 0; b < p; ++b) ring.blocks.push_back({nullptr, op.plan.out + b * bytes, op.plan.n});
  co_return co_await run_ring(op, std::move(ring));
}

}  // namespace procgroup::ucx_backend
