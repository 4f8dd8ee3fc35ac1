// collbench --direct: collectives on a raw Gloo context (see gloo_direct.h). Each case
// mirrors backends/gloo/gloo_ops.cc, minus procgroup: no queue, no worker thread, no work
// objects, scratch allocated once.
#include "gloo_direct.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/broadcast.h>
#include <gloo/gather.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/scatter.h>
#include <gloo/types.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "gloo_rendezvous.h"
#include "host_math.h"

namespace procgroup::bench {
namespace {

using ReduceFn = std::function<void(void*, const void*, const void*, size_t)>;

// Messages up to this size use bcube, as in the gloo backend (gloo_ops.h: kBcubeMaxBytes).
constexpr size_t kBcubeMaxBytes = 256 * 1024;
// Send/recv slot: anything; the pairs are matched in posting order.
constexpr uint64_t kSendrecvSlot = 0x5e4d;

// Gloo overloads its kernels: the pointer type picks the type-erased one.
using KernelPtr = void (*)(void*, const void*, const void*, size_t);

template <typename T>
ReduceFn gloo_kernel(RedOp op) {
  KernelPtr fn = nullptr;
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg: fn = &gloo::sum<T>; break;
    case RedOp::kProd: fn = &gloo::product<T>; break;
    case RedOp::kMin: fn = &gloo::min<T>; break;
    case RedOp::kMax: fn = &gloo::max<T>; break;
  }
  return fn;
}

// Gloo has no bfloat16: widen to float, reduce, round to nearest even (as the backend does).
ReduceFn bf16_kernel(RedOp op) {
  return [op](void* c, const void* a, const void* b, size_t n) {
    auto* out = static_cast<uint16_t*>(c);
    const auto* x = static_cast<const uint16_t*>(a);
    const auto* y = static_cast<const uint16_t*>(b);
    for (size_t i = 0; i < n; ++i) {
      const float u = bf16_to_float(x[i]), v = bf16_to_float(y[i]);
      float r = u + v;
      if (op == RedOp::kProd) r = u * v;
      if (op == RedOp::kMin) r = u < v ? u : v;
      if (op == RedOp::kMax) r = u > v ? u : v;
      out[i] = float_to_bf16(r);
    }
  };
}

ReduceFn reduce_function(Dtype dtype, RedOp op) {
  switch (dtype) {
    case Dtype::kF32: return gloo_kernel<float>(op);
    case Dtype::kF64: return gloo_kernel<double>(op);
    // Gloo's float16 kernels, as the backend uses them (with their store bug: see
    // docs/benchmarks.md, Known problems).
    case Dtype::kF16: return gloo_kernel<gloo::float16>(op);
    case Dtype::kBf16: return bf16_kernel(op);
    case Dtype::kI8: return gloo_kernel<int8_t>(op);
    case Dtype::kU8: return gloo_kernel<uint8_t>(op);
    case Dtype::kI32: return gloo_kernel<int32_t>(op);
    case Dtype::kI64: return gloo_kernel<int64_t>(op);
  }
  return nullptr;
}

// Calls fn(T{}) with the unsigned type of es bytes: Gloo's options are typed by size only.
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
T* typed(const void* p) {
  return static_cast<T*>(const_cast<void*>(p));
}

class GlooDirectEngine : public Engine {
 public:
  GlooDirectEngine(std::shared_ptr<gloo::Context> context, std::chrono::milliseconds timeout)
      : context_(std::move(context)), timeout_(timeout) {
    const char* forced = std::getenv("PROCGROUP_GLOO_ALLREDUCE");
    forced_ = forced != nullptr ? forced : "";
  }

  void prepare(const OpCall& c) override {
    const size_t es = dtype_size(c.dtype);
    size_t need = 0;
    if (c.op == Coll::kReduceScatter) need = c.layout.send_count * es;
    if (c.in_place && (c.op == Coll::kGather || c.op == Coll::kScatter)) need = c.layout.count * es;
    if (c.in_place && c.op == Coll::kAlltoall) need = c.layout.send_count * es;
    if (scratch_.size() < need) scratch_.resize(need);
  }

  void run(const OpCall& c, int iters, bool /*blocking: Gloo calls always are*/) override {
    if (c.op == Coll::kSendrecv) return run_sendrecv(c, iters);
    for (int i = 0; i < iters; ++i) run_once(c);
  }

 private:
  template <typename Options>
  void common(Options& o) {
    o.setTag(tag_++);
    o.setTimeout(timeout_);
  }

  gloo::AllreduceOptions::Algorithm algorithm(size_t bytes) const {
    if (forced_ == "ring") return gloo::AllreduceOptions::Algorithm::RING;
    if (forced_ == "bcube") return gloo::AllreduceOptions::Algorithm::BCUBE;
    return bytes <= kBcubeMaxBytes ? gloo::AllreduceOptions::Algorithm::BCUBE
                                   : gloo::AllreduceOptions::Algorithm::RING;
  }

  // in == nullptr: in place on out.
  void allreduce(const OpCall& c, const void* in, void* out, uint64_t n) {
    const size_t es = dtype_size(c.dtype);
    gloo::AllreduceOptions o(context_);
    common(o);
    o.setAlgorithm(algorithm(n * es));
    o.setReduceFunction(reduce_function(c.dtype, c.redop));
    with_storage(es, [&](auto t) {
      using T = decltype(t);
      if (in != nullptr) o.template setInput<T>(typed<T>(in), n);
      o.template setOutput<T>(typed<T>(out), n);
    });
    gloo::allreduce(o);
  }

  void finish_avg(const OpCall& c, void* data, uint64_t n) const {
    if (c.redop == RedOp::kAvg) scale_down(c.dtype, data, n, context_->size);
  }

  void run_once(const OpCall& c) {
    const size_t es = dtype_size(c.dtype);
    const uint64_t n = c.layout.count;
    const size_t bytes = n * es;
    const int rank = context_->rank, size = context_->size;
    switch (c.op) {
      case Coll::kAllreduce:
        allreduce(c, c.in_place ? nullptr : c.input, c.output, n);
        return finish_avg(c, c.output, n);
      case Coll::kReduceScatter:
        allreduce(c, c.input, scratch_.data(), n * size);
        std::memcpy(c.output, scratch_.data() + rank * bytes, bytes);
        return finish_avg(c, c.output, n);
      case Coll::kReduce: {
        gloo::ReduceOptions o(context_);
        common(o);
        o.setRoot(c.root);
        o.setReduceFunction(reduce_function(c.dtype, c.redop));
        with_storage(es, [&](auto t) {
          using T = decltype(t);
          if (!c.in_place) o.template setInput<T>(typed<T>(c.input), n);
          o.template setOutput<T>(typed<T>(c.output), n);
        });
        gloo::reduce(o);
        if (rank == c.root) finish_avg(c, c.output, n);
        return;
      }
      case Coll::kBroadcast: {
        gloo::BroadcastOptions o(context_);
        common(o);
        o.setRoot(c.root);
        if (rank == c.root && !c.in_place) o.setInput<uint8_t>(typed<uint8_t>(c.input), bytes);
        o.setOutput<uint8_t>(typed<uint8_t>(c.output), bytes);
        return gloo::broadcast(o);
      }
      case Coll::kAllgather: {
        gloo::AllgatherOptions o(context_);
        common(o);
        if (!c.in_place) o.setInput<uint8_t>(typed<uint8_t>(c.input), bytes);
        o.setOutput<uint8_t>(typed<uint8_t>(c.output), bytes * size);
        return gloo::allgather(o);
      }
      case Coll::kGather: {
        const void* in = c.input;
        if (c.in_place && rank == c.root) {  // Gloo copies in -> out[rank]: a distinct source
          std::memcpy(scratch_.data(), c.input, bytes);
          in = scratch_.data();
        }
        gloo::GatherOptions o(context_);
        common(o);
        o.setRoot(c.root);
        o.setInput<uint8_t>(typed<uint8_t>(in), bytes);
        if (rank == c.root) o.setOutput<uint8_t>(typed<uint8_t>(c.output), bytes * size);
        return gloo::gather(o);
      }
      case Coll::kScatter: {
        gloo::ScatterOptions o(context_);
        common(o);
        o.setRoot(c.root);
        void* out = c.output;
        if (rank == c.root) {
          std::vector<uint8_t*> blocks;
          for (int i = 0; i < size; ++i) blocks.push_back(typed<uint8_t>(c.input) + i * bytes);
          o.setInputs<uint8_t>(blocks, bytes);
          if (c.in_place) out = scratch_.data();  // our block is in place already
        }
        o.setOutput<uint8_t>(typed<uint8_t>(out), bytes);
        return gloo::scatter(o);
      }
      case Coll::kAlltoall: {
        const void* in = c.input;
        if (c.in_place) {
          std::memcpy(scratch_.data(), c.output, bytes * size);
          in = scratch_.data();
        }
        gloo::AlltoallOptions o(context_);
        common(o);
        o.setInput<uint8_t>(typed<uint8_t>(in), bytes * size);
        o.setOutput<uint8_t>(typed<uint8_t>(c.output), bytes * size);
        return gloo::alltoall(o);
      }
      case Coll::kSendrecv: return;  // run_sendrecv
    }
  }

  // Send to rank+1, receive from rank-1, one pair of unbound buffers for all iterations.
  void run_sendrecv(const OpCall& c, int iters) {
    const size_t bytes = c.layout.count * dtype_size(c.dtype);
    const int rank = context_->rank, size = context_->size;
    auto send = context_->createUnboundBuffer(c.input, bytes);
    auto recv = context_->createUnboundBuffer(c.output, bytes);
    for (int i = 0; i < iters; ++i) {
      send->send((rank + 1) % size, kSendrecvSlot);
      recv->recv((rank + size - 1) % size, kSendrecvSlot);
      if (!send->waitSend(timeout_) || !recv->waitRecv(timeout_)) {
        throw std::runtime_error("gloo direct: sendrecv was aborted");
      }
    }
  }

  std::shared_ptr<gloo::Context> context_;
  std::chrono::milliseconds timeout_;
  std::string forced_;
  uint32_t tag_ = 0;
  std::vector<std::byte> scratch_;
};

}  // namespace

std::unique_ptr<Engine> make_gloo_direct_engine(Communicator& comm,
                                                std::chrono::milliseconds timeout) {
  return std::make_unique<GlooDirectEngine>(connect_gloo(comm, timeout), timeout);
}

}  // namespace procgroup::bench
