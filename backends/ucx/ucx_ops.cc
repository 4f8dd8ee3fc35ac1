// Choosing an algorithm for each operation, the tuning knobs, and the scratch pool
// (see ucx_algorithms.h).
#include <cstdlib>
#include <cstring>

#include "op_fingerprint.h"
#include "ucx_algorithms.h"
#include "ucx_group.h"
#include "ucx_op.h"

namespace procgroup::ucx_backend {
namespace {

constexpr size_t kMinScratch = 4096;
constexpr size_t kMaxCachedScratch = size_t{512} << 20;

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

template <class T>
void read_number(const char* name, T min, T max, T* out) {
  const char* value = env(name);
  if (value == nullptr) return;
  char* end = nullptr;
  const long long parsed = std::strtoll(value, &end, 10);
  if (end != value && *end == '\0' && parsed >= static_cast<long long>(min) &&
      parsed <= static_cast<long long>(max)) {
    *out = static_cast<T>(parsed);
  }
}

bool is(const char* value, const char* name) {
  return value != nullptr && std::strcmp(value, name) == 0;
}

// A group of one, or an empty message: only the local copy (AVG over one rank is itself).
// With one rank every buffer is one block of n elements.
Task local_only(Op& op) {
  const Plan& plan = op.plan;
  if (plan.in_place || plan.in == nullptr || plan.out == nullptr || plan.n == 0) co_return Status{};
  std::memmove(plan.out, plan.in, plan.bytes());
  co_return Status{};
}

}  // namespace

Tuning Tuning::from_env() {
  Tuning t;
  const char* a = env("PROCGROUP_UCX_ALLREDUCE");
  if (is(a, "rd")) t.allreduce = Allreduce::kRecursiveDoubling;
  if (is(a, "rabenseifner")) t.allreduce = Allreduce::kRabenseifner;
  if (is(a, "ring")) t.allreduce = Allreduce::kRing;
  if (is(a, "shm")) t.allreduce = Allreduce::kShared;
  if (is(a, "shm_small")) t.allreduce = Allreduce::kSharedSmall;
  for (auto [name, tree] : {std::pair{"PROCGROUP_UCX_BROADCAST", &t.broadcast},
                            std::pair{"PROCGROUP_UCX_REDUCE", &t.reduce}}) {
    const char* v = env(name);
    if (is(v, "binomial")) *tree = Tree::kBinomial;
    if (is(v, "chain")) *tree = Tree::kChain;
  }
  const char* g = env("PROCGROUP_UCX_ALLGATHER");
  if (is(g, "bruck")) t.allgather = Allgather::kBruck;
  if (is(g, "ring")) t.allgather = Allgather::kRing;
  constexpr size_t kBig = size_t{1} << 40;
  read_number<size_t>("PROCGROUP_UCX_RD_MAX_BYTES", 0, kBig, &t.rd_max);
  read_number<size_t>("PROCGROUP_UCX_RING_MIN_BYTES", 0, kBig, &t.ring_min);
  read_number<size_t>("PROCGROUP_UCX_TREE_MAX_BYTES", 0, kBig, &t.tree_max);
  read_number<size_t>("PROCGROUP_UCX_BRUCK_MAX_BYTES", 0, kBig, &t.bruck_max);
  read_number<size_t>("PROCGROUP_UCX_CHUNK_BYTES", 1, kBig, &t.chunk_bytes);
  read_number<size_t>("PROCGROUP_UCX_SHM_MIN_BYTES", 0, kBig, &t.shm_min);
  read_number<size_t>("PROCGROUP_UCX_SHM_CHUNK_BYTES", 0, size_t{1} << 30, &t.shm_chunk);
  read_number<int>("PROCGROUP_UCX_WINDOW", 1, 64, &t.window);
  read_number<int64_t>("PROCGROUP_UCX_SPIN_US", 0, 10'000'000, &t.spin_us);
  read_number<int>("PROCGROUP_UCX_CONNECT_ALL_MAX", 0, 1 << 22, &t.connect_all_max);
  int fused = 1;
  read_number<int>("PROCGROUP_UCX_FUSED_RECV", 0, 1, &fused);
  t.fused_recv = fused != 0;
  return t;
}

// The algorithm that moves a collective's data (make_task adds what surrounds it).
static Task make_data_task(Op& op) {
  const Tuning& t = op.group->tuning();
  const Plan& plan = op.plan;
  const pg_op_t kind = op.desc.op;
  const size_t bytes = plan.bytes();
  auto by_chain = [&](Tuning::Tree tree) {
    return tree == Tuning::Tree::kChain || (tree == Tuning::Tree::kAuto && bytes > t.tree_max);
  };
  switch (kind) {
    case PG_OP_ALLREDUCE: {
      Tuning::Allreduce a = t.allreduce;
      const bool shared = op.group->shm().ready();
      const bool fits_slot = bytes <= ShmWindows::kSlotBytes;
      if ((a == Tuning::Allreduce::kShared && !shared) ||
          (a == Tuning::Allreduce::kSharedSmall && !(shared && fits_slot))) {
        a = Tuning::Allreduce::kAuto;
      }
      if (a == Tuning::Allreduce::kAuto) {
        if (shared && bytes >= t.shm_min && plan.n >= static_cast<uint64_t>(op.size)) {
          a = Tuning::Allreduce::kShared;
        } else if (shared && fits_slot) {
          a = Tuning::Allreduce::kSharedSmall;
        } else if (bytes <= t.rd_max || plan.n < static_cast<uint64_t>(op.size)) {
          a = Tuning::Allreduce::kRecursiveDoubling;
        } else if (op.size > 2 && bytes < t.ring_min) {
          a = Tuning::Allreduce::kRabenseifner;
        } else {
          a = Tuning::Allreduce::kRing;
        }
      }
      if (a == Tuning::Allreduce::kRecursiveDoubling) return allreduce_recursive_doubling(op);
      if (a == Tuning::Allreduce::kRabenseifner) return allreduce_rabenseifner(op);
      if (a == Tuning::Allreduce::kShared) return allreduce_shared(op);
      if (a == Tuning::Allreduce::kSharedSmall) return allreduce_shared_small(op);
      return allreduce_ring(op);
    }
    case PG_OP_BROADCAST: return by_chain(t.broadcast) ? chain(op) : broadcast_binomial(op);
    case PG_OP_REDUCE: return by_chain(t.reduce) ? chain(op) : reduce_binomial(op);
    case PG_OP_ALLGATHER:
      if (t.allgather == Tuning::Allgather::kBruck ||
          (t.allgather == Tuning::Allgather::kAuto && bytes * op.size <= t.bruck_max)) {
        return allgather_bruck(op);
      }
      return allgather_ring(op);
    case PG_OP_REDUCE_SCATTER: return reduce_scatter_ring(op);
    case PG_OP_GATHER:
    case PG_OP_SCATTER: return gather_scatter_linear(op);
    default: return alltoall_pairwise(op);
  }
}

Task make_task(Op& op) {
  const Plan& plan = op.plan;
  const pg_op_t kind = op.desc.op;
  if (kind == PG_OP_SEND || kind == PG_OP_RECV) return p2p_message(op);
  // Every message of a collective carries what this rank passed (ucx_tags.h).
  op.fingerprint =
      OpFingerprint::collective(kind, plan.dtype, plan.n, op.desc.root, op.desc.reduce_op).bits;
  if (kind == PG_OP_BARRIER) return barrier_dissemination(op);
  if (op.size == 1 || plan.n == 0) return local_only(op);
  if (kind == PG_OP_BROADCAST || kind == PG_OP_SCATTER) {
    return confirmed_by_receivers(op, make_data_task(op));
  }
  return make_data_task(op);
}

// ---- Scratch pool ------------------------------------------------------------------------

ScratchPool::~ScratchPool() {
  for (const ScratchLease& f : free_) std::free(f.data);
}

ScratchLease ScratchPool::take(size_t bytes) {
  size_t want = kMinScratch;
  while (want < bytes) want <<= 1;
  for (size_t i = 0; i < free_.size(); ++i) {
    if (free_[i].capacity == want) {
      const ScratchLease found = free_[i];
      cached_bytes_ -= want;
      free_[i] = free_.back();
      free_.pop_back();
      return found;
    }
  }
  return ScratchLease{static_cast<std::byte*>(std::aligned_alloc(64, want)), want};
}

void ScratchPool::give(ScratchLease lease) {
  if (cached_bytes_ + lease.capacity > kMaxCachedScratch) {
    std::free(lease.data);
    return;
  }
  cached_bytes_ += lease.capacity;
  free_.push_back(lease);
}

}  // namespace procgroup::ucx_backend
