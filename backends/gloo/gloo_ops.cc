// Operation mapping for the gloo backend (see gloo_ops.h; README.md has the table of
// which Gloo collective runs each op). Reductions run the core's kernels (kit::reduce_to
// through the host services); AVG is SUM, then kit::scale_down.
#include "gloo_ops.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/scatter.h>
#include <gloo/types.h>

#include <cstring>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <vector>

#include "gloo_plan.h"

namespace procgroup::gloo_backend {
namespace {

// Calls fn(T{}) with the unsigned type of es bytes: gloo's options are typed by size only.
template <typename Fn>
void with_storage(size_t es, Fn&& fn) {
  switch (es) {
    case 1: fn(uint8_t{}); return;
    case 2: fn(uint16_t{}); return;
    case 4: fn(uint32_t{}); return;
    default: fn(uint64_t{}); return;
  }
}

template <typename T>
T* typed(const std::byte* p) {
  return reinterpret_cast<T*>(const_cast<std::byte*>(p));
}

// gloo's reduce function, out[i] = a[i] op b[i] (out may be a or b): the core's kernel for
// (dtype, op), AVG as SUM. Not gloo's own f16 operators: gloo::float16's assignment skips
// the store when the old bits, read as an integer, equal the new value, which leaves stale
// results (docs/benchmarks.md). The kernel cannot fail for a planned op with the host
// negotiated for kernels; if it did, the exception fails the work as gloo's own would.
gloo::AllreduceOptions::Func reduce_function(const OpEnv& env, const Plan& p, int32_t op) {
  return [host = env.host, dtype = p.dtype, op = static_cast<pg_reduce_op_t>(op)](
             void* out, const void* a, const void* b, size_t n) {
    const Status st = kit::reduce_to(host, out, a, b, n, dtype, op);
    if (!st.ok()) throw std::runtime_error(st.message);
  };
}

// Gloo's options for env's operation: its context, collective tag and time left.
template <typename Options>
Options options_for(const OpEnv& env) {
  Options o(env.context);
  o.setTag(env.tag);
  o.setTimeout(env.timeout);
  return o;
}

gloo::AllreduceOptions::Algorithm algorithm(const OpEnv& env, size_t bytes) {
  switch (env.allreduce) {
    case AllreduceChoice::kRing: return gloo::AllreduceOptions::Algorithm::RING;
    case AllreduceChoice::kBcube: return gloo::AllreduceOptions::Algorithm::BCUBE;
    default:
      return bytes <= kBcubeMaxBytes ? gloo::AllreduceOptions::Algorithm::BCUBE
                                     : gloo::AllreduceOptions::Algorithm::RING;
  }
}

// gloo::allreduce of n elements per buffer, in -> out (in == nullptr: in place).
void allreduce(const OpEnv& env, const pg_backend_op_t& op, const Plan& p, const std::byte* in,
               std::byte* out, uint64_t n) {
  auto o = options_for<gloo::AllreduceOptions>(env);
  o.setAlgorithm(algorithm(env, static_cast<size_t>(n) * p.es));
  o.setReduceFunction(reduce_function(env, p, op.reduce_op));
  with_storage(p.es, [&](auto t) {
    using T = decltype(t);
    if (in != nullptr) o.template setInput<T>(typed<T>(in), n);
    o.template setOutput<T>(typed<T>(out), n);
  });
  gloo::allreduce(o);
}

Status finish_avg(const OpEnv& env, const pg_backend_op_t& op, const Plan& p, std::byte* data) {
  if (op.reduce_op != PG_REDUCE_AVG || data == nullptr) return {};
  const Status st = kit::scale_down(env.host, data, p.n, p.dtype, static_cast<uint64_t>(env.size));
  return st.ok() ? st : Status::error(st.code, op_label(op) + ": avg: " + st.message);
}

Status run_reduce(const OpEnv& env, const pg_backend_op_t& op, const Plan& p) {
  const bool root = env.rank == op.root;
  // gloo reduces through every rank's output: keep a non-root's input intact. gloo reads
  // back only what it wrote there, so stale scratch contents do not matter.
  std::byte* out = root ? p.out : env.scratch->get(p.bytes());
  auto o = options_for<gloo::ReduceOptions>(env);
  o.setRoot(op.root);
  o.setReduceFunction(reduce_function(env, p, op.reduce_op));
  with_storage(p.es, [&](auto t) {
    using T = decltype(t);
    if (!p.in_place) o.template setInput<T>(typed<T>(p.in), p.n);
    o.template setOutput<T>(typed<T>(out), p.n);
  });
  gloo::reduce(o);
  return root ? finish_avg(env, op, p, p.out) : Status{};
}

Status run_reduce_scatter(const OpEnv& env, const pg_backend_op_t& op, const Plan& p) {
  const uint64_t total = p.n * static_cast<uint64_t>(env.size);
  std::byte* tmp = env.scratch->get(static_cast<size_t>(total) * p.es);
  allreduce(env, op, p, p.in, tmp, total);
  std::memcpy(p.out, tmp + env.rank * p.bytes(), p.bytes());
  return finish_avg(env, op, p, p.out);
}

void run_gather(const OpEnv& env, const pg_backend_op_t& op, const Plan& p) {
  const bool root = env.rank == op.root;
  const std::byte* in = p.in;
  if (root && p.in_place) {  // gloo copies in -> out[rank]: give it a distinct source
    std::byte* tmp = env.scratch->get(p.bytes());
    std::memcpy(tmp, p.in, p.bytes());
    in = tmp;
  }
  auto o = options_for<gloo::GatherOptions>(env);
  o.setRoot(op.root);
  o.setInput<uint8_t>(typed<uint8_t>(in), p.bytes());
  if (root) o.setOutput<uint8_t>(typed<uint8_t>(p.out), p.bytes() * env.size);
  gloo::gather(o);
}

void run_scatter(const OpEnv& env, const pg_backend_op_t& op, const Plan& p) {
  const bool root = env.rank == op.root;
  std::byte* out = p.out;
  auto o = options_for<gloo::ScatterOptions>(env);
  o.setRoot(op.root);
  if (root) {
    std::vector<uint8_t*> blocks;
    blocks.reserve(static_cast<size_t>(env.size));
    for (int i = 0; i < env.size; ++i) blocks.push_back(typed<uint8_t>(p.in + i * p.bytes()));
    o.setInputs<uint8_t>(blocks, p.bytes());
    // Our block is already in place; gloo's local copy goes to scratch.
    if (p.in_place) out = env.scratch->get(p.bytes());
  }
  o.setOutput<uint8_t>(typed<uint8_t>(out), p.bytes());
  gloo::scatter(o);
}

// In place: gloo::alltoall would need a copy of the whole buffer as its input, plus its own
// local copy of this rank's block. Only the blocks leaving this rank are copied out here
// (all of them before any receive is posted over them), then sent and received the way
// gloo::alltoall does, on its slot, so the peers may run either form.
void run_alltoall_in_place(const OpEnv& env, const Plan& p) {
  const size_t chunk = p.bytes();
  const int peers = env.size - 1;
  std::byte* tmp = env.scratch->get(chunk * peers);
  for (int i = 1; i <= peers; ++i) {
    std::memcpy(tmp + (i - 1) * chunk, p.out + ((env.rank + i) % env.size) * chunk, chunk);
  }
  const auto slot = gloo::Slot::build(gloo::kAlltoallSlotPrefix, env.tag);
  auto in = env.context->createUnboundBuffer(tmp, chunk * peers);
  auto out = env.context->createUnboundBuffer(p.out, chunk * env.size);
  for (int i = 1; i <= peers; ++i) {
    const int to = (env.rank + i) % env.size;
    const int from = (env.rank + env.size - i) % env.size;
    in->send(to, slot, (i - 1) * chunk, chunk);
    out->recv(from, slot, from * chunk, chunk);
  }
  for (int i = 1; i <= peers; ++i) {
    // false means a wait was aborted: never report that as delivered
    if (!in->waitSend(env.timeout) || !out->waitRecv(env.timeout)) {
      throw gloo::IoException("alltoall: a wait on a peer was aborted");
    }
  }
}

void run_alltoall(const OpEnv& env, const Plan& p) {
  if (p.in_place) {
    run_alltoall_in_place(env, p);
    return;
  }
  const size_t total = p.bytes() * env.size;
  auto o = options_for<gloo::AlltoallOptions>(env);
  o.setInput<uint8_t>(typed<uint8_t>(p.in), total);
  o.setOutput<uint8_t>(typed<uint8_t>(p.out), total);
  gloo::alltoall(o);
}

// FNV-1a over 64-bit fields.
uint32_t fnv1a(std::initializer_list<uint64_t> fields) {
  uint32_t h = 2166136261u;
  for (uint64_t f : fields) {
    for (int i = 0; i < 8; ++i) {
      h ^= static_cast<uint8_t>(f >> (8 * i));
      h *= 16777619u;
    }
  }
  return h;
}

}  // namespace

std::byte* Scratch::get(size_t bytes) {
  if (bytes > capacity_ || !data_) {
    data_.reset();  // free first: the old and the new block are never both held
    capacity_ = 0;
    data_ = std::make_unique_for_overwrite<std::byte[]>(bytes == 0 ? 1 : bytes);
    capacity_ = bytes;
  }
  return data_.get();
}

Status run_collective(const OpEnv& env, const pg_backend_op_t& op, const Plan& p) {
  if (op.op == PG_OP_BARRIER) {
    if (env.size == 1) return {};
    auto o = options_for<gloo::BarrierOptions>(env);
    gloo::barrier(o);
    return {};
  }
  if (p.n == 0) return {};
  if (env.size == 1) {  // every operation is a copy of this rank's n elements, or nothing
    if (!p.in_place && p.out != nullptr && p.in != p.out) std::memcpy(p.out, p.in, p.bytes());
    return {};
  }
  switch (op.op) {
    case PG_OP_ALLREDUCE:
      allreduce(env, op, p, p.in_place ? nullptr : p.in, p.out, p.n);
      return finish_avg(env, op, p, p.out);
    case PG_OP_BROADCAST: {
      auto o = options_for<gloo::BroadcastOptions>(env);
      o.setRoot(op.root);
      if (env.rank == op.root && !p.in_place) o.setInput<uint8_t>(typed<uint8_t>(p.in), p.bytes());
      o.setOutput<uint8_t>(typed<uint8_t>(p.out), p.bytes());
      gloo::broadcast(o);
      return {};
    }
    case PG_OP_REDUCE: return run_reduce(env, op, p);
    case PG_OP_ALLGATHER: {
      auto o = options_for<gloo::AllgatherOptions>(env);
      if (!p.in_place) o.setInput<uint8_t>(typed<uint8_t>(p.in), p.bytes());
      o.setOutput<uint8_t>(typed<uint8_t>(p.out), p.bytes() * env.size);
      gloo::allgather(o);
      return {};
    }
    case PG_OP_REDUCE_SCATTER: return run_reduce_scatter(env, op, p);
    case PG_OP_GATHER: run_gather(env, op, p); return {};
    case PG_OP_SCATTER: run_scatter(env, op, p); return {};
    case PG_OP_ALLTOALL: run_alltoall(env, p); return {};
    default: return Status::error(PG_ERR_INTERNAL, op_label(op) + ": not a collective");
  }
}

uint32_t collective_tag(uint32_t count, const pg_backend_op_t& op, const Plan& plan) {
  const kit::OpInfo& info = kit::op_info(op.op);
  const bool barrier = op.op == PG_OP_BARRIER;
  const uint32_t h =
      fnv1a({static_cast<uint64_t>(op.op), barrier ? 0 : static_cast<uint64_t>(plan.dtype),
             barrier ? 0 : plan.n, info.rooted ? static_cast<uint64_t>(op.root) : 0,
             info.reducing ? static_cast<uint64_t>(op.reduce_op) : 0});
  return (count << 24) | (h & 0xFFFFFFu);
}

}  // namespace procgroup::gloo_backend
