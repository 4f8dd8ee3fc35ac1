// Allreduce algorithms, and the chunk-pipelined ring shared with reduce_scatter and
// allgather (see ucx_algorithms.h).
#include <algorithm>
#include <bit>
#include <coroutine>
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

// count elements split over `parts` blocks, the first count % parts one element longer.
struct Blocks {
  uint64_t count;
  int parts;
  uint64_t off(int b) const {
    const uint64_t base = count / parts, extra = count % parts;
    return b * base + std::min<uint64_t>(b, extra);
  }
  uint64_t len(int b) const { return count / parts + (static_cast<uint64_t>(b) < count % parts); }
};

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

// ---- Through shared-memory windows ---------------------------------------------------------

// Waits until no earlier collective of the group uses the windows.
struct ShmTurn {
  Op& op;
  bool await_ready() { return op.group->shm().try_take(); }
  void await_suspend(std::coroutine_handle<> h) { op.group->shm().queue(&op, h); }
  void await_resume() const noexcept {}
};

// Holds the turn until the algorithm ends, then hands it to the next collective queued.
struct ShmHold {
  UcxGroup* group;
  explicit ShmHold(UcxGroup* g) : group(g) {}
  ShmHold(const ShmHold&) = delete;
  ShmHold& operator=(const ShmHold&) = delete;
  ~ShmHold() {
    group->shm().give_back(
        [g = group](Op* op, std::coroutine_handle<> h) { g->resume_later(op, h); });
  }
};

// Every rank tells every other that it reached `step` of this collective, and hears the
// same. With counts: each message carries the sender's element count (theirs[peer]).
void post_handshake(Io& io, const Op& op, uint64_t step, const uint64_t* mine = nullptr,
                    uint64_t* theirs = nullptr) {
  static constexpr uint64_t kNothing[1] = {};
  static uint64_t sink[1];
  const size_t bytes = mine != nullptr ? sizeof(uint64_t) : 0;
  for (int i = 1; i < op.size; ++i) {
    const int peer = (op.rank + i) % op.size;
    io.recv(peer, theirs != nullptr ? theirs + peer : sink, bytes, step);
    io.send(peer, mine != nullptr ? mine : kNothing, bytes, step);
  }
}

// "recv of 4000 bytes from rank 1: rank 1 sent 6000 bytes (...)": the message Io gives a
// receive of another size, for a peer whose count came in a handshake or slot header.
Status count_mismatch(const Op& op, int peer, uint64_t their_count) {
  std::string text = "recv of ";
  text += std::to_string(op.plan.bytes());
  text += " bytes from rank ";
  text += std::to_string(peer);
  text += ": rank ";
  text += std::to_string(peer);
  text += " sent ";
  text += std::to_string(their_count * op.es());
  text += " bytes (the ranks passed different counts)";
  return Status::error(PG_ERR_MISMATCH, text);
}

// A peer that passed another count: the handshake's messages are all alike in size, so
// the counts they carry are compared (the 16-bit fingerprint misses 1 in 32).
Status check_counts(const Op& op, const uint64_t* theirs) {
  for (int j = 0; j < op.size; ++j) {
    if (j != op.rank && theirs[j] != op.plan.n) return count_mismatch(op, j, theirs[j]);
  }
  return {};
}

// Waits until every peer posted its slot for `seq`; fails if the group broke meanwhile.
struct ShmArrival {
  Op& op;
  uint64_t seq;
  bool await_ready() const { return op.group->shm().all_posted(seq); }
  void await_suspend(std::coroutine_handle<> h) { op.group->shm().arrival = {&op, h, seq}; }
  Status await_resume() const {
    if (op.group->shm().all_posted(seq)) return {};
    return Status::error(PG_ERR_ABORTED, "stopped waiting for the peers' shared-memory slots");
  }
};

// A peer's slot from a call with other arguments.
Status check_slots(const Op& op, const ShmWindows& windows, uint64_t seq) {
  for (int j = 0; j < op.size; ++j) {
    const ShmWindows::SlotHeader* h = windows.header(j, seq);
    if (j == op.rank || (h->count == op.plan.n && h->fingerprint == op.fingerprint)) continue;
    const std::string args = differences(h->fingerprint, op.fingerprint);
    if (args.empty()) return count_mismatch(op, j, h->count);
    std::string text = "rank " + std::to_string(j);
    text += " called this operation with other arguments (";
    text += args;
    text += ")";
    return Status::error(PG_ERR_MISMATCH, text);
  }
  return {};
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

// Per chunk: every rank copies its contribution to the others' blocks into its window;
// after a handshake, rank r reduces block r from its input and every peer's window into
// its output, and puts the result into its window; after a second handshake every rank
// copies the others' results. Each block is reduced once: all ranks get the same bits.
Task allreduce_shared(Op& op) {
  ShmWindows& windows = op.group->shm();
  ShmTurn turn{op};
  co_await turn;
  const ShmHold hold{op.group};
  const int p = op.size, r = op.rank;
  const size_t es = op.es();
  const uint64_t per_chunk = std::max<uint64_t>(1, windows.half_bytes() / es);
  auto* counts = reinterpret_cast<uint64_t*>(op.scratch(sizeof(uint64_t) * (p + 1)));
  counts[p] = op.plan.n;  // ours, as sent
  uint64_t step = 0;
  for (uint64_t first = 0; first < op.plan.n; first += per_chunk) {
    const Blocks blocks{std::min(per_chunk, op.plan.n - first), p};
    const std::byte* in = (op.plan.in_place ? op.plan.out : op.plan.in) + first * es;
    std::byte* out = op.plan.out + first * es;
    const uint64_t chunk = windows.next_chunk();
    std::byte* mine = windows.mine(chunk);
    auto at = [&](int b) { return blocks.off(b) * es; };
    for (int b = 0; b < p; ++b) {
      if (b != r) std::memcpy(mine + at(b), in + at(b), blocks.len(b) * es);
    }
    Io filled(op);
    if (step == 0) {
      post_handshake(filled, op, step++, &counts[p], counts);
    } else {
      post_handshake(filled, op, step++);
    }
    PG_KIT_CO_TRY(co_await filled);
    if (step == 1) PG_KIT_CO_TRY(check_counts(op, counts));
    // Ours first, then the peers' in rank order (in place, out aliases our input block).
    const uint64_t n = blocks.len(r);
    const std::byte* acc = in + at(r);
    for (int j = 0; j < p; ++j) {
      if (j == r) continue;
      PG_KIT_CO_TRY(op.combine(out + at(r), acc, windows.peer(j, chunk) + at(r), n));
      acc = out + at(r);
    }
    PG_KIT_CO_TRY(op.finish_avg(out + at(r), n));
    std::memcpy(mine + at(r), out + at(r), n * es);
    Io reduced(op);
    post_handshake(reduced, op, step++);
    PG_KIT_CO_TRY(co_await reduced);
    for (int b = 0; b < p; ++b) {
      if (b != r) std::memcpy(out + at(b), windows.peer(b, chunk) + at(b), blocks.len(b) * es);
    }
  }
  co_return Status{};
}

// Small messages: every rank posts its data in its slot, then reduces every rank's slot
// in rank order itself (the same bits everywhere), in one round of shared-memory signals.
Task allreduce_shared_small(Op& op) {
  ShmWindows& windows = op.group->shm();
  ShmTurn turn{op};
  co_await turn;
  const ShmHold hold{op.group};
  const uint64_t seq = windows.next_seq();
  ShmWindows::SlotHeader* mine = windows.header(op.rank, seq);
  const std::byte* in = op.plan.in_place ? op.plan.out : op.plan.in;  // the plan says where
  std::memcpy(windows.data(op.rank, seq), in, op.plan.bytes());
  mine->count = op.plan.n;
  mine->fingerprint = op.fingerprint;
  windows.publish(seq);
  ShmArrival arrival{op, seq};
  PG_KIT_CO_TRY(co_await arrival);
  PG_KIT_CO_TRY(check_slots(op, windows, seq));
  std::byte* out = op.plan.out;
  for (int j = 1; j < op.size; ++j) {
    const std::byte* acc = j == 1 ? windows.data(0, seq) : out;
    PG_KIT_CO_TRY(op.combine(out, acc, windows.data(j, seq), op.plan.n));
  }
  co_return op.finish_avg(out, op.plan.n);
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
