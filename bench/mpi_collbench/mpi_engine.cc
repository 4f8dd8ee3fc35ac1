// mpi_collbench's MPI Communicator and Engine (see mpi_engine.h).
#include "mpi_engine.h"

#include <climits>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "host_math.h"

namespace procgroup::bench {
namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw std::runtime_error(std::string(what) + " failed: " + std::string(text, len));
}

MPI_Op builtin(RedOp op) {
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg: return MPI_SUM;
    case RedOp::kProd: return MPI_PROD;
    case RedOp::kMin: return MPI_MIN;
    case RedOp::kMax: return MPI_MAX;
  }
  return MPI_SUM;
}

// Index into the user-op arrays: sum (and avg), prod, min, max.
size_t op_index(RedOp op) {
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg: return 0;
    case RedOp::kProd: return 1;
    case RedOp::kMin: return 2;
    case RedOp::kMax: return 3;
  }
  return 0;
}

template <Dtype D, RedOp Op>
void user_op(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  reduce_into(D, Op, inout, in, static_cast<uint64_t>(*len));
}

template <Dtype D>
std::array<MPI_Op, 4> make_ops() {
  std::array<MPI_Op, 4> ops{};
  check(MPI_Op_create(&user_op<D, RedOp::kSum>, 1, &ops[0]), "MPI_Op_create");
  check(MPI_Op_create(&user_op<D, RedOp::kProd>, 1, &ops[1]), "MPI_Op_create");
  check(MPI_Op_create(&user_op<D, RedOp::kMin>, 1, &ops[2]), "MPI_Op_create");
  check(MPI_Op_create(&user_op<D, RedOp::kMax>, 1, &ops[3]), "MPI_Op_create");
  return ops;
}

MPI_Datatype two_bytes() {
  MPI_Datatype t = MPI_DATATYPE_NULL;
  check(MPI_Type_contiguous(2, MPI_BYTE, &t), "MPI_Type_contiguous");
  check(MPI_Type_commit(&t), "MPI_Type_commit");
  return t;
}

void* in_place_or(bool in_place, void* buffer) { return in_place ? MPI_IN_PLACE : buffer; }

// One operation with the same arguments either way: the blocking function when requests is
// null, else the nonblocking one, its request appended.
template <typename Blocking, typename Nonblocking, typename... Args>
void issue(const char* name, std::vector<MPI_Request>* requests, Blocking blocking,
           Nonblocking nonblocking, Args... args) {
  if constexpr (!std::is_null_pointer_v<Blocking>) {
    if (requests == nullptr) return check(blocking(args...), name);
  }
  check(nonblocking(args..., &requests->emplace_back(MPI_REQUEST_NULL)), name);
}

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  check(MPI_Init(argc, argv), "MPI_Init");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

MpiSession::~MpiSession() { MPI_Finalize(); }

std::string MpiSession::library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string version(text, static_cast<size_t>(len));
  return version.substr(0, version.find_first_of(",\n"));
}

MpiCommunicator::MpiCommunicator() {
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

void MpiCommunicator::barrier() { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

double MpiCommunicator::allreduce(double value, RedOp op) {
  check(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, builtin(op), MPI_COMM_WORLD),
        "MPI_Allreduce");
  return value;
}

int64_t MpiCommunicator::sum(int64_t value) {
  check(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD),
        "MPI_Allreduce");
  return value;
}

void MpiCommunicator::broadcast(void* data, size_t bytes, int root) {
  check(MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
}

MpiEngine::MpiEngine()
    : half_(two_bytes()),
      bf16_(two_bytes()),
      half_ops_(make_ops<Dtype::kF16>()),
      bf16_ops_(make_ops<Dtype::kBf16>()) {
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiEngine::~MpiEngine() {
  for (MPI_Op& op : half_ops_) MPI_Op_free(&op);
  for (MPI_Op& op : bf16_ops_) MPI_Op_free(&op);
  MPI_Type_free(&half_);
  MPI_Type_free(&bf16_);
}

MPI_Datatype MpiEngine::type_of(Dtype dtype) const {
  switch (dtype) {
    case Dtype::kF32: return MPI_FLOAT;
    case Dtype::kF64: return MPI_DOUBLE;
    case Dtype::kF16: return half_;
    case Dtype::kBf16: return bf16_;
    case Dtype::kI8: return MPI_INT8_T;
    case Dtype::kU8: return MPI_UINT8_T;
    case Dtype::kI32: return MPI_INT32_T;
    case Dtype::kI64: return MPI_INT64_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op MpiEngine::op_of(Dtype dtype, RedOp op) const {
  if (dtype == Dtype::kF16) return half_ops_[op_index(op)];
  if (dtype == Dtype::kBf16) return bf16_ops_[op_index(op)];
  return builtin(op);
}

uint64_t MpiEngine::in_place_output_offset(const OpCall& call, int rank) const {
  if (call.op == Coll::kReduceScatter) return 0;
  return Engine::in_place_output_offset(call, rank);
}

void MpiEngine::run(const OpCall& call, int iters, bool blocking) {
  if (call.layout.count > static_cast<uint64_t>(INT_MAX)) {
    throw std::invalid_argument("MPI counts are int: " + std::to_string(call.layout.count) +
                                " elements is too many");
  }
  const MPI_Datatype type = type_of(call.dtype);
  const MPI_Op op = op_of(call.dtype, call.redop);
  const int count = static_cast<int>(call.layout.count);
  if (blocking) {
    for (int i = 0; i < iters; ++i) {
      start(call, type, op, count, nullptr);
      finish(call);
    }
    return;
  }
  requests_.clear();
  requests_.reserve(2 * static_cast<size_t>(iters));  // sendrecv: two per iteration
  for (int i = 0; i < iters; ++i) start(call, type, op, count, &requests_);
  check(MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE),
        "MPI_Waitall");
  for (int i = 0; i < iters; ++i) finish(call);
}

// avg: MPI has none, so a sum followed by a local division, as procgroup's core emulates it.
void MpiEngine::finish(const OpCall& c) const {
  if (c.redop != RedOp::kAvg) return;
  const bool reduced_here = c.op == Coll::kAllreduce || c.op == Coll::kReduceScatter ||
                            (c.op == Coll::kReduce && rank_ == c.root);
  if (reduced_here) scale_down(c.dtype, c.output, c.layout.count, size_);
}

void MpiEngine::start(const OpCall& c, MPI_Datatype type, MPI_Op op, int count,
                      std::vector<MPI_Request>* requests) {
  const MPI_Comm world = MPI_COMM_WORLD;
  const bool root = rank_ == c.root;
  void* in = in_place_or(c.in_place, c.input);
  switch (c.op) {
    case Coll::kAllreduce:
      return issue("MPI_Allreduce", requests, MPI_Allreduce, MPI_Iallreduce, in, c.output, count,
                   type, op, world);
    case Coll::kReduceScatter:
      return issue("MPI_Reduce_scatter_block", requests, MPI_Reduce_scatter_block,
                   MPI_Ireduce_scatter_block, in, c.output, count, type, op, world);
    case Coll::kReduce:
      return issue("MPI_Reduce", requests, MPI_Reduce, MPI_Ireduce,
                   in_place_or(c.in_place && root, c.input), c.output, count, type, op, c.root,
                   world);
    case Coll::kBroadcast:
      // MPI_Bcast has one buffer: out of place, the root copies its input first (as Gloo does).
      if (root && !c.in_place) std::memcpy(c.output, c.input, c.layout.count * dtype_size(c.dtype));
      return issue("MPI_Bcast", requests, MPI_Bcast, MPI_Ibcast, c.output, count, type, c.root,
                   world);
    case Coll::kAllgather:
      return issue("MPI_Allgather", requests, MPI_Allgather, MPI_Iallgather, in, count, type,
                   c.output, count, type, world);
    case Coll::kGather:
      return issue("MPI_Gather", requests, MPI_Gather, MPI_Igather,
                   in_place_or(c.in_place && root, c.input), count, type, c.output, count, type,
                   c.root, world);
    case Coll::kScatter:
      return issue("MPI_Scatter", requests, MPI_Scatter, MPI_Iscatter, c.input, count, type,
                   in_place_or(c.in_place && root, c.output), count, type, c.root, world);
    case Coll::kAlltoall:
      return issue("MPI_Alltoall", requests, MPI_Alltoall, MPI_Ialltoall, in, count, type, c.output,
                   count, type, world);
    case Coll::kSendrecv: {
      const int to = (rank_ + 1) % size_;
      const int from = (rank_ + size_ - 1) % size_;
      if (requests == nullptr) {
        return check(MPI_Sendrecv(c.input, count, type, to, 0, c.output, count, type, from, 0,
                                  world, MPI_STATUS_IGNORE),
                     "MPI_Sendrecv");
      }
      issue("MPI_Irecv", requests, nullptr, MPI_Irecv, c.output, count, type, from, 0, world);
      issue("MPI_Isend", requests, nullptr, MPI_Isend, c.input, count, type, to, 0, world);
      return;
    }
  }
}

}  // namespace procgroup::bench
