// Bruck allgather, pairwise alltoall, dissemination barrier, send and recv (see
// ucx_algorithms.h).
#include <algorithm>
#include <cstring>

#include "ucx_algorithms.h"
#include "ucx_io.h"
#include "ucx_op.h"
#include "ucx_tags.h"

namespace procgroup::ucx_backend {
namespace {

// Steps of a pairwise exchange posted before waiting for the first: enough to keep the
// links busy, few enough that large alltoalls do not flood the receivers.
constexpr int kAlltoallWindow = 8;

}  // namespace

Task allgather_bruck(Op& op) {
  // After round k (k = 1, 2, 4, ...) this rank holds the blocks of ranks r .. r+2k-1, in
  // that order, at the front of tmp; a final rotation puts them in rank order.
  const int p = op.size, r = op.rank;
  const size_t bytes = op.plan.bytes();
  std::byte* tmp = op.scratch(bytes * p);
  std::memcpy(tmp, op.plan.in, bytes);
  uint64_t step = 0;
  for (int k = 1; k < p; k <<= 1, ++step) {
    const int count = std::min(k, p - k);
    Io io(op);
    io.recv((r + k) % p, tmp + k * bytes, count * bytes, step);
    io.send((r - k + p) % p, tmp, count * bytes, step);
    PG_KIT_CO_TRY(co_await io);
  }
  for (int i = 0; i < p; ++i) {
    std::byte* into = op.plan.out + ((r + i) % p) * bytes;
    if (into != op.plan.in) std::memcpy(into, tmp + i * bytes, bytes);
  }
  co_return Status{};
}

Task alltoall_pairwise(Op& op) {
  // Step s: send block r+s to rank r+s, receive block r-s from rank r-s.
  const int p = op.size, r = op.rank;
  const size_t bytes = op.plan.bytes();
  const std::byte* src = op.plan.in;
  if (op.plan.in_place) {
    std::byte* copy = op.scratch(bytes * p);
    std::memcpy(copy, op.plan.out, bytes * p);
    src = copy;
  } else {
    std::memcpy(op.plan.out + r * bytes, src + r * bytes, bytes);
  }
  for (int first = 1; first < p; first += kAlltoallWindow) {
    Io io(op);
    for (int s = first; s < std::min(p, first + kAlltoallWindow); ++s) {
      const int to = (r + s) % p, from = (r - s + p) % p;
      io.recv(from, op.plan.out + from * bytes, bytes, s);
      io.send(to, src + to * bytes, bytes, s);
    }
    PG_KIT_CO_TRY(co_await io);
  }
  co_return Status{};
}

Task barrier_dissemination(Op& op) {
  const int p = op.size, r = op.rank;
  uint64_t step = 0;
  static constexpr std::byte kNothing[1] = {};
  std::byte sink[1];
  for (int k = 1; k < p; k <<= 1, ++step) {
    Io io(op);
    io.recv((r - k + p) % p, sink, 0, step);
    io.send((r + k) % p, kNothing, 0, step);
    PG_KIT_CO_TRY(co_await io);
  }
  co_return Status{};
}

Task p2p_message(Op& op) {
  Io io(op);
  const int peer = op.desc.peer;
  if (op.desc.op == PG_OP_SEND) {
    io.send_tagged(peer, op.plan.in, op.plan.bytes(), tags::p2p(op.rank, op.desc.tag, op.dtype()));
  } else {
    io.recv_tagged(peer, op.plan.out, op.plan.bytes(), tags::p2p(peer, op.desc.tag, op.dtype()));
  }
  co_return co_await io;
}

}  // namespace procgroup::ucx_backend
