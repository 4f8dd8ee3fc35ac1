// Buffer shapes and bus bandwidth factors per collective (see layout.h).
#include "layout.h"

#include <algorithm>

namespace procgroup::bench {

Layout layout_for(Coll op, uint64_t bytes, size_t element_size, int nranks) {
  const uint64_t n = static_cast<uint64_t>(nranks);
  const uint64_t total = bytes / element_size;
  const uint64_t per_rank = total / n;
  Layout l;
  switch (op) {
    case Coll::kAllreduce:
    case Coll::kBroadcast:
    case Coll::kReduce:
    case Coll::kSendrecv: l.count = l.send_count = l.recv_count = total; break;
    case Coll::kAllgather:
    case Coll::kGather:
      l.count = l.send_count = per_rank;
      l.recv_count = per_rank * n;
      l.send_in_place_offset = per_rank;
      break;
    case Coll::kReduceScatter:
    case Coll::kScatter:
      l.count = l.recv_count = per_rank;
      l.send_count = per_rank * n;
      l.recv_in_place_offset = per_rank;
      break;
    case Coll::kAlltoall:
      l.count = per_rank;
      l.send_count = l.recv_count = per_rank * n;
      break;
  }
  l.bytes = std::max(l.send_count, l.recv_count) * element_size;
  return l;
}

double busbw_factor(Coll op, int nranks) {
  const double n = nranks;
  switch (op) {
    case Coll::kAllreduce: return 2.0 * (n - 1) / n;
    case Coll::kAllgather:
    case Coll::kReduceScatter:
    case Coll::kAlltoall:
    case Coll::kGather:
    case Coll::kScatter: return (n - 1) / n;
    case Coll::kBroadcast:
    case Coll::kReduce:
    case Coll::kSendrecv: return 1.0;
  }
  return 1.0;
}

std::vector<uint64_t> sweep_sizes(uint64_t min_bytes, uint64_t max_bytes, uint64_t factor) {
  std::vector<uint64_t> sizes;
  if (min_bytes == 0 || factor < 2) return sizes;
  for (uint64_t s = min_bytes; s <= max_bytes; s *= factor) {
    sizes.push_back(s);
    if (s > max_bytes / factor) break;  // the next step would overflow or pass max
  }
  return sizes;
}

}  // namespace procgroup::bench
