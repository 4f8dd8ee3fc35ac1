// collbench --direct with -g cuda: collectives on a raw NCCL communicator (see
// nccl_direct.h). Each call is the one NCCL function for the operation (gather, scatter and
// alltoall as grouped send/recv, as nccl-tests does), on a stream of the engine's own.
#include "nccl_direct.h"

#include <nccl.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "cuda_memory.h"

namespace procgroup::bench {
namespace {

void check_nccl(ncclResult_t status, const char* what, ncclComm_t comm = nullptr) {
  if (status == ncclSuccess || status == ncclInProgress) return;
  std::string message = std::string("nccl direct: ") + what + ": " + ncclGetErrorString(status);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') message += std::string(" (") + last + ")";
  throw std::runtime_error(message);
}

ncclDataType_t nccl_dtype(Dtype dtype) {
  switch (dtype) {
    case Dtype::kF32: return ncclFloat32;
    case Dtype::kF64: return ncclFloat64;
    case Dtype::kF16: return ncclFloat16;
    case Dtype::kBf16: return ncclBfloat16;
    case Dtype::kI8: return ncclInt8;
    case Dtype::kU8: return ncclUint8;
    case Dtype::kI32: return ncclInt32;
    case Dtype::kI64: return ncclInt64;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(RedOp op) {
  switch (op) {
    case RedOp::kSum: return ncclSum;
    case RedOp::kProd: return ncclProd;
    case RedOp::kMin: return ncclMin;
    case RedOp::kMax: return ncclMax;
    case RedOp::kAvg: return ncclAvg;
  }
  return ncclSum;
}

// What rank 0 sends the others: whether ncclGetUniqueId worked, and the id.
struct IdMessage {
  int32_t ok = 0;
  ncclUniqueId id{};
};

class NcclDirectEngine : public Engine {
 public:
  NcclDirectEngine(Communicator& comm, int device) : rank_(comm.rank()), size_(comm.size()) {
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
    IdMessage message;
    if (rank_ == 0) message.ok = ncclGetUniqueId(&message.id) == ncclSuccess ? 1 : 0;
    comm.broadcast(&message, sizeof message, 0);  // every rank takes part, even after a failure
    if (message.ok == 0) throw std::runtime_error("nccl direct: ncclGetUniqueId failed on rank 0");
    check_nccl(ncclCommInitRank(&comm_, size_, message.id, rank_), "ncclCommInitRank");
    // A blocking stream: it waits for the runner's copies on the legacy default stream, and
    // the copies back wait for it, with no extra synchronisation in the timed loop.
    check_cuda(cudaStreamCreate(&stream_), "cudaStreamCreate");
  }
  ~NcclDirectEngine() override {
    if (scratch_ != nullptr) cudaFree(scratch_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    if (comm_ != nullptr) ncclCommDestroy(comm_);
  }
  NcclDirectEngine(const NcclDirectEngine&) = delete;
  NcclDirectEngine& operator=(const NcclDirectEngine&) = delete;

  Timer* timer() override { return &timer_; }

  void prepare(const OpCall& c) override {
    const uint64_t need =
        c.in_place && c.op == Coll::kAlltoall ? c.layout.send_count * dtype_size(c.dtype) : 0;
    if (need <= scratch_bytes_) return;
    if (scratch_ != nullptr) check_cuda(cudaFree(scratch_), "cudaFree");
    scratch_ = nullptr;
    scratch_bytes_ = 0;
    check_cuda(cudaMalloc(&scratch_, need), "cudaMalloc");
    scratch_bytes_ = need;
  }

  void run(const OpCall& c, int iters, bool blocking) override {
    for (int i = 0; i < iters; ++i) {
      issue(c);
      if (blocking) check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    }
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

 private:
  void issue(const OpCall& c) {
    const uint64_t n = c.layout.count;
    const size_t bytes = n * dtype_size(c.dtype);
    const ncclDataType_t t = nccl_dtype(c.dtype);
    const ncclRedOp_t op = nccl_op(c.redop);
    auto* in = static_cast<char*>(c.input);
    auto* out = static_cast<char*>(c.output);
    switch (c.op) {
      case Coll::kAllreduce:
        return check_nccl(ncclAllReduce(in, out, n, t, op, comm_, stream_), "ncclAllReduce", comm_);
      case Coll::kAllgather:
        return check_nccl(ncclAllGather(in, out, n, t, comm_, stream_), "ncclAllGather", comm_);
      case Coll::kReduceScatter:
        return check_nccl(ncclReduceScatter(in, out, n, t, op, comm_, stream_), "ncclReduceScatter",
                          comm_);
      case Coll::kBroadcast:
        return check_nccl(ncclBroadcast(in, out, n, t, c.root, comm_, stream_), "ncclBroadcast",
                          comm_);
      case Coll::kReduce:
        return check_nccl(ncclReduce(in, out, n, t, op, c.root, comm_, stream_), "ncclReduce",
                          comm_);
      case Coll::kAlltoall: {
        if (c.in_place) {  // send from a copy: blocks are overwritten while others still read
          check_cuda(
              cudaMemcpyAsync(scratch_, in, bytes * size_, cudaMemcpyDeviceToDevice, stream_),
              "cudaMemcpyAsync");
          in = static_cast<char*>(scratch_);
        }
        return grouped([&] {
          for (int r = 0; r < size_; ++r) {
            check_nccl(ncclSend(in + r * bytes, n, t, r, comm_, stream_), "ncclSend", comm_);
            check_nccl(ncclRecv(out + r * bytes, n, t, r, comm_, stream_), "ncclRecv", comm_);
          }
        });
      }
      case Coll::kGather:
        return grouped([&] {
          // In place, the root's block is already where it belongs.
          if (!(c.in_place && rank_ == c.root)) {
            check_nccl(ncclSend(in, n, t, c.root, comm_, stream_), "ncclSend", comm_);
          }
          if (rank_ != c.root) return;
          for (int r = 0; r < size_; ++r) {
            if (c.in_place && r == rank_) continue;
            check_nccl(ncclRecv(out + r * bytes, n, t, r, comm_, stream_), "ncclRecv", comm_);
          }
        });
      case Coll::kScatter:
        return grouped([&] {
          if (rank_ == c.root) {
            for (int r = 0; r < size_; ++r) {
              if (c.in_place && r == rank_) continue;
              check_nccl(ncclSend(in + r * bytes, n, t, r, comm_, stream_), "ncclSend", comm_);
            }
          }
          if (!(c.in_place && rank_ == c.root)) {
            check_nccl(ncclRecv(out, n, t, c.root, comm_, stream_), "ncclRecv", comm_);
          }
        });
      case Coll::kSendrecv:
        return grouped([&] {
          check_nccl(ncclSend(in, n, t, (rank_ + 1) % size_, comm_, stream_), "ncclSend", comm_);
          check_nccl(ncclRecv(out, n, t, (rank_ + size_ - 1) % size_, comm_, stream_), "ncclRecv",
                     comm_);
        });
    }
  }

  // ncclGroupEnd runs even when a call inside failed, so NCCL's group state stays balanced.
  template <typename Fn>
  void grouped(Fn&& calls) {
    check_nccl(ncclGroupStart(), "ncclGroupStart", comm_);
    try {
      calls();
    } catch (...) {
      ncclGroupEnd();
      throw;
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd", comm_);
  }

  int rank_, size_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  CudaWallTimer timer_;
  void* scratch_ = nullptr;
  uint64_t scratch_bytes_ = 0;
};

}  // namespace

std::unique_ptr<Engine> make_nccl_direct_engine(Communicator& comm, int device) {
  return std::make_unique<NcclDirectEngine>(comm, device);
}

}  // namespace procgroup::bench
