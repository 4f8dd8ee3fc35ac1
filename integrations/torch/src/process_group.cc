#include "process_group.h"

#include <Python.h>

#include <algorithm>
#include <cstdlib>

#include "tensors.h"

namespace procgroup::torch_backend {
namespace {

using c10d::OpType;

std::string env_text(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

int env_int(const char* name, int fallback) {
  const std::string v = env_text(name);
  if (v.empty()) return fallback;
  char* end = nullptr;
  const long parsed = std::strtol(v.c_str(), &end, 10);
  return *end == '\0' ? static_cast<int>(parsed) : fallback;
}

// Which members share this host, by torchrun's layout (world rank / LOCAL_WORLD_SIZE);
// without LOCAL_WORLD_SIZE the job is taken to be on one host, as procgroup does.
void local_placement(int rank, int size, const std::vector<int64_t>& global_ranks, int* local_rank,
                     int* local_size) {
  const int per_host = env_int("LOCAL_WORLD_SIZE", 0);
  if (per_host <= 0) {
    *local_rank = rank;
    *local_size = size;
    return;
  }
  auto world_rank = [&](int r) { return global_ranks.empty() ? r : global_ranks[r]; };
  const int64_t my_host = world_rank(rank) / per_host;
  *local_rank = 0;
  *local_size = 0;
  for (int r = 0; r < size; ++r) {
    if (world_rank(r) / per_host != my_host) continue;
    if (r < rank) ++*local_rank;
    ++*local_size;
  }
}

void check_rank(int peer, int size, const char* call) {
  TORCH_CHECK(peer >= 0 && peer < size, "procgroup ", call, ": rank ", peer,
              " is outside this group of ", size);
}

void check_list(size_t got, int size, const char* call, const char* what) {
  TORCH_CHECK(got == static_cast<size_t>(size), "procgroup ", call, ": ", what, " must hold ", size,
              " tensors (one per rank), got ", got);
}

// Equal blocks as dim-0 rows per rank, or -1 when the splits differ.
int64_t equal_split_rows(const at::Tensor& t, const std::vector<int64_t>& splits, int size) {
  if (splits.empty()) return t.dim() > 0 && t.size(0) % size == 0 ? t.size(0) / size : -1;
  if (static_cast<int>(splits.size()) != size) return -1;
  for (int64_t s : splits)
    if (s != splits[0]) return -1;
  return splits[0];
}

}  // namespace

c10::intrusive_ptr<ProcessGroupProcgroup> ProcessGroupProcgroup::create(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout, const std::vector<int64_t>& global_ranks) {
  TORCH_CHECK(global_ranks.empty() || static_cast<int>(global_ranks.size()) == size,
              "procgroup: ", global_ranks.size(), " global ranks for a group of ", size);
  Parts parts;
  parts.store = std::make_unique<TorchStore>(store);
  parts.timeout = timeout;
  local_placement(rank, size, global_ranks, &parts.local_rank, &parts.local_size);
  parts.completer = std::make_shared<Completer>();
  parts.cpu_group = create_group(parts, rank, size, false, -1);
  return c10::make_intrusive<ProcessGroupProcgroup>(rank, size, std::move(parts));
}

ProcessGroupProcgroup::ProcessGroupProcgroup(int rank, int size, Parts parts) noexcept
    : TorchBackendBase(rank, size),
      parts_(std::move(parts)),
      cpu_group_(parts_.cpu_group),
      completer_(parts_.completer) {}

ProcessGroupProcgroup::~ProcessGroupProcgroup() {
  // Python's garbage collector destroys us holding the GIL, while the completer may need it
  // to free the last reference to a tensor Python still knows: let it go while we wait.
  PyThreadState* python = PyGILState_Check() ? PyEval_SaveThread() : nullptr;
  // Destroying a group finishes its works (bounded by the timeout), so the completer's
  // queue drains before it stops.
  if (cuda_group_ != nullptr) pg_group_destroy(cuda_group_);
  if (cpu_group_ != nullptr) pg_group_destroy(cpu_group_);
  completer_->stop();
  if (python != nullptr) PyEval_RestoreThread(python);
}

pg_group_t ProcessGroupProcgroup::create_group(const Parts& parts, int rank, int size, bool cuda,
                                               int device_index) {
  const std::string chosen = env_text("PROCGROUP_BACKEND");
  pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
  o.rank = rank;
  o.size = size;
  o.local_rank = parts.local_rank;
  o.local_size = parts.local_size;
  o.timeout_ms = parts.timeout.count() > 0 ? parts.timeout.count() : 0;
  o.device_type = cuda ? PG_DEVICE_CUDA : PG_DEVICE_CPU;
  o.name = cuda ? "torch-cuda" : "torch-cpu";
  // CPU tensors never go to nccl: with PROCGROUP_BACKEND=nccl they go to gloo (the core's own
  // default, ucx where it works on every rank, applies only when the variable is unset).
  if (!cuda && chosen == "nccl") o.backend = "gloo";
  if (cuda) {
    // The nccl plugin serves the device named by the local rank.
    o.local_rank = device_index;
    o.local_size = std::max(parts.local_size, device_index + 1);
  }
  pg_group_t group = nullptr;
  pg_status_t status = pg_group_create_with_store(&o, parts.store->c_store(), &group);
  TORCH_CHECK(status == PG_OK, "procgroup: creating the ", cuda ? "CUDA" : "CPU", " group (rank ",
              rank, " of ", size, ", PROCGROUP_BACKEND=", chosen.empty() ? "unset" : chosen,
              ") failed: ", pg_status_name(status), ": ", pg_last_error());
  return group;
}

std::string ProcessGroupProcgroup::plugin_name() const {
  const char* name = nullptr;
  if (pg_group_backend_name(cpu_group_, &name) != PG_OK || name == nullptr) return "";
  return name;
}

pg_group_t ProcessGroupProcgroup::group_for(const at::Device& device) {
  if (!device.is_cuda()) return cpu_group_;
  std::lock_guard lock(cuda_mutex_);
  if (cuda_group_ == nullptr) {
    // A device index, not a character: -1 (none) must stay -1.
    const int index = device.index();  // NOLINT(bugprone-signed-char-misuse)
    cuda_group_ = create_group(parts_, getRank(), getSize(), true, index);
    cuda_device_ = index;
  }
  TORCH_CHECK(device.index() == cuda_device_,
              "procgroup: this process group runs on cuda:", cuda_device_, "; got a tensor on ",
              device, " (one device per process)");
  return cuda_group_;
}

WorkPtr ProcessGroupProcgroup::run(OpType type, const char* call, Issue issue, pg_group_t group,
                                   const pg_buffer_t* input, const pg_buffer_t* output,
                                   const pg_op_options_t& opts, std::vector<at::Tensor> outputs,
                                   std::vector<at::Tensor> keep, std::function<void()> on_success) {
  pg_work_t work = nullptr;
  check_issued(issue(group, input, output, &opts, &work), call);
  WorkPtr made = c10::make_intrusive<PgWork>(work, type, call, std::move(outputs), std::move(keep),
                                             std::move(on_success), completer_);
  std::lock_guard lock(coalescing_mutex_);
  if (coalescing_) coalesced_.push_back(made);
  return made;
}

WorkPtr ProcessGroupProcgroup::broadcast(std::vector<at::Tensor>& tensors,
                                         const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = single_tensor(tensors, "broadcast");
  check_rank(opts.rootRank, getSize(), "broadcast");
  pg_buffer_t b = to_buffer(t, Use::kMove, "broadcast");
  pg_op_options_t o = op_options(opts.timeout);
  o.root = static_cast<int32_t>(opts.rootRank);
  return run(OpType::BROADCAST, "broadcast", pg_broadcast, group_for(t.device()), nullptr, &b, o,
             tensors, {});
}

WorkPtr ProcessGroupProcgroup::allreduce(std::vector<at::Tensor>& tensors,
                                         const c10d::AllreduceOptions& opts) {
  const at::Tensor& t = single_tensor(tensors, "allreduce");
  pg_buffer_t b = to_buffer(t, Use::kReduce, "allreduce");
  pg_op_options_t o = op_options(opts.timeout);
  o.reduce_op = to_reduce_op(opts.reduceOp, t, "allreduce");
  return run(OpType::ALLREDUCE, "allreduce", pg_allreduce, group_for(t.device()), nullptr, &b, o,
             tensors, {});
}

WorkPtr ProcessGroupProcgroup::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                   const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "procgroup allreduce_coalesced: no tensors");
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type() && t.device() == tensors[0].device(),
                "procgroup allreduce_coalesced: every tensor must have the dtype and device of "
                "the first (",
                tensors[0].scalar_type(), " on ", tensors[0].device(), "), got ", t.scalar_type(),
                " on ", t.device());
    (void)to_buffer(t, Use::kReduce, "allreduce_coalesced");
  }
  at::Tensor flat = flatten(tensors);
  pg_buffer_t b = to_buffer(flat, Use::kReduce, "allreduce_coalesced");
  pg_op_options_t o = op_options(opts.timeout);
  o.reduce_op = to_reduce_op(opts.reduceOp, flat, "allreduce_coalesced");
  std::vector<at::Tensor> targets = tensors;
  return run(OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", pg_allreduce,
             group_for(flat.device()), nullptr, &b, o, tensors, {flat},
             [flat, targets]() mutable { unflatten_into(flat, targets); });
}

WorkPtr ProcessGroupProcgroup::reduce(std::vector<at::Tensor>& tensors,
                                      const c10d::ReduceOptions& opts) {
  const at::Tensor& t = single_tensor(tensors, "reduce");
  check_rank(opts.rootRank, getSize(), "reduce");
  pg_buffer_t b = to_buffer(t, Use::kReduce, "reduce");
  pg_op_options_t o = op_options(opts.timeout);
  o.reduce_op = to_reduce_op(opts.reduceOp, t, "reduce");
  o.root = static_cast<int32_t>(opts.rootRank);
  return run(OpType::REDUCE, "reduce", pg_reduce, group_for(t.device()), nullptr, &b, o, tensors,
             {});
}

WorkPtr ProcessGroupProcgroup::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                         std::vector<at::Tensor>& inputs,
                                         const c10d::AllgatherOptions& opts) {
  const at::Tensor& t = single_tensor(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1, "procgroup allgather: takes one output list, got ",
              outputs.size());
  check_list(outputs[0].size(), getSize(), "allgather", "the output list");
  check_same_layout(outputs[0], t, "allgather");
  pg_buffer_t in = to_buffer(t, Use::kMove, "allgather");
  at::Tensor flat = at::empty({getSize() * t.numel()}, t.options());
  pg_buffer_t out = to_buffer(flat, Use::kMove, "allgather");
  std::vector<at::Tensor> targets = outputs[0];
  return run(OpType::ALLGATHER, "allgather", pg_allgather, group_for(t.device()), &in, &out,
             op_options(opts.timeout), targets, {t, flat},
             [flat, targets]() mutable { unflatten_into(flat, targets); });
}

WorkPtr ProcessGroupProcgroup::_allgather_base(at::Tensor& output, at::Tensor& input,
                                               const c10d::AllgatherOptions& opts) {
  check_pair(output, "output", input, getSize(), "_allgather_base");
  pg_buffer_t in = to_buffer(input, Use::kMove, "_allgather_base");
  pg_buffer_t out = to_buffer(output, Use::kMove, "_allgather_base");
  return run(OpType::_ALLGATHER_BASE, "_allgather_base", pg_allgather, group_for(input.device()),
             &in, &out, op_options(opts.timeout), {output}, {input});
}

WorkPtr ProcessGroupProcgroup::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                      std::vector<at::Tensor>& inputs,
                                      const c10d::GatherOptions& opts) {
  const at::Tensor& t = single_tensor(inputs, "gather");
  check_rank(opts.rootRank, getSize(), "gather");
  pg_buffer_t in = to_buffer(t, Use::kMove, "gather");
  pg_op_options_t o = op_options(opts.timeout);
  o.root = static_cast<int32_t>(opts.rootRank);
  if (getRank() != opts.rootRank) {
    TORCH_CHECK(outputs.empty(), "procgroup gather: only the root passes output tensors");
    return run(OpType::GATHER, "gather", pg_gather, group_for(t.device()), &in, nullptr, o, {},
               {t});
  }
  TORCH_CHECK(outputs.size() == 1, "procgroup gather: the root takes one output list, got ",
              outputs.size());
  check_list(outputs[0].size(), getSize(), "gather", "the root's output list");
  check_same_layout(outputs[0], t, "gather");
  at::Tensor flat = at::empty({getSize() * t.numel()}, t.options());
  pg_buffer_t out = to_buffer(flat, Use::kMove, "gather");
  std::vector<at::Tensor> targets = outputs[0];
  return run(OpType::GATHER, "gather", pg_gather, group_for(t.device()), &in, &out, o, targets,
             {t, flat}, [flat, targets]() mutable { unflatten_into(flat, targets); });
}

WorkPtr ProcessGroupProcgroup::scatter(std::vector<at::Tensor>& outputs,
                                       std::vector<std::vector<at::Tensor>>& inputs,
                                       const c10d::ScatterOptions& opts) {
  const at::Tensor& t = single_tensor(outputs, "scatter");
  check_rank(opts.rootRank, getSize(), "scatter");
  pg_buffer_t out = to_buffer(t, Use::kMove, "scatter");
  pg_op_options_t o = op_options(opts.timeout);
  o.root = static_cast<int32_t>(opts.rootRank);
  if (getRank() != opts.rootRank) {
    TORCH_CHECK(inputs.empty(), "procgroup scatter: only the root passes input tensors");
    return run(OpType::SCATTER, "scatter", pg_scatter, group_for(t.device()), nullptr, &out, o,
               outputs, {});
  }
  TORCH_CHECK(inputs.size() == 1, "procgroup scatter: the root takes one input list, got ",
              inputs.size());
  check_list(inputs[0].size(), getSize(), "scatter", "the root's input list");
  check_same_layout(inputs[0], t, "scatter");
  at::Tensor flat = flatten(inputs[0]);
  pg_buffer_t in = to_buffer(flat, Use::kMove, "scatter");
  return run(OpType::SCATTER, "scatter", pg_scatter, group_for(t.device()), &in, &out, o, outputs,
             {flat});
}

WorkPtr ProcessGroupProcgroup::reduce_scatter(std::vector<at::Tensor>& outputs,
                                              std::vector<std::vector<at::Tensor>>& inputs,
                                              const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& t = single_tensor(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1, "procgroup reduce_scatter: takes one input list, got ",
              inputs.size());
  check_list(inputs[0].size(), getSize(), "reduce_scatter", "the input list");
  check_same_layout(inputs[0], t, "reduce_scatter");
  at::Tensor flat = flatten(inputs[0]);
  pg_buffer_t in = to_buffer(flat, Use::kReduce, "reduce_scatter");
  pg_buffer_t out = to_buffer(t, Use::kReduce, "reduce_scatter");
  pg_op_options_t o = op_options(opts.timeout);
  o.reduce_op = to_reduce_op(opts.reduceOp, t, "reduce_scatter");
  return run(OpType::REDUCE_SCATTER, "reduce_scatter", pg_reduce_scatter, group_for(t.device()),
             &in, &out, o, outputs, {flat});
}

WorkPtr ProcessGroupProcgroup::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                    const c10d::ReduceScatterOptions& opts) {
  check_pair(input, "input", output, getSize(), "_reduce_scatter_base");
  pg_buffer_t in = to_buffer(input, Use::kReduce, "_reduce_scatter_base");
  pg_buffer_t out = to_buffer(output, Use::kReduce, "_reduce_scatter_base");
  pg_op_options_t o = op_options(opts.timeout);
  o.reduce_op = to_reduce_op(opts.reduceOp, input, "_reduce_scatter_base");
  return run(OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base", pg_reduce_scatter,
             group_for(input.device()), &in, &out, o, {output}, {input});
}

WorkPtr ProcessGroupProcgroup::alltoall_base(at::Tensor& output, at::Tensor& input,
                                             std::vector<int64_t>& output_splits,
                                             std::vector<int64_t>& input_splits,
                                             const c10d::AllToAllOptions& opts) {
  const int64_t in_rows = equal_split_rows(input, input_splits, getSize());
  const int64_t out_rows = equal_split_rows(output, output_splits, getSize());
  TORCH_CHECK_NOT_IMPLEMENTED(
      in_rows >= 0 && in_rows == out_rows,
      "procgroup alltoall_base: only equal splits are supported (every rank sends and "
      "receives the same number of rows to and from each rank)");
  check_pair(output, "output", input, 1, "alltoall_base");
  pg_buffer_t in = to_buffer(input, Use::kMove, "alltoall_base");
  pg_buffer_t out = to_buffer(output, Use::kMove, "alltoall_base");
  return run(OpType::ALLTOALL_BASE, "alltoall_base", pg_alltoall, group_for(input.device()), &in,
             &out, op_options(opts.timeout), {output}, {input});
}

WorkPtr ProcessGroupProcgroup::alltoall(std::vector<at::Tensor>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::AllToAllOptions& opts) {
  check_list(inputs.size(), getSize(), "alltoall", "the input list");
  check_list(outputs.size(), getSize(), "alltoall", "the output list");
  const at::Tensor& first = inputs[0];
  for (const auto* list : {&inputs, &outputs})
    for (const at::Tensor& t : *list)
      TORCH_CHECK_NOT_IMPLEMENTED(t.numel() == first.numel(),
                                  "procgroup alltoall: only tensors of equal size are supported "
                                  "(got ",
                                  t.numel(), " and ", first.numel(), " elements)");
  check_same_layout(outputs, first, "alltoall");
  at::Tensor flat_in = flatten(inputs);
  at::Tensor flat_out = at::empty_like(flat_in);
  pg_buffer_t in = to_buffer(flat_in, Use::kMove, "alltoall");
  pg_buffer_t out = to_buffer(flat_out, Use::kMove, "alltoall");
  std::vector<at::Tensor> targets = outputs;
  return run(OpType::ALLTOALL, "alltoall", pg_alltoall, group_for(first.device()), &in, &out,
             op_options(opts.timeout), targets, {flat_in, flat_out},
             [flat_out, targets]() mutable { unflatten_into(flat_out, targets); });
}

WorkPtr ProcessGroupProcgroup::barrier(const c10d::BarrierOptions& opts) {
  pg_op_options_t o = op_options(opts.timeout);
  pg_work_t work = nullptr;
  check_issued(pg_barrier(cpu_group_, &o, &work), "barrier");
  return c10::make_intrusive<PgWork>(work, OpType::BARRIER, "barrier", std::vector<at::Tensor>{},
                                     std::vector<at::Tensor>{}, nullptr, completer_);
}

WorkPtr ProcessGroupProcgroup::point_to_point(bool is_send, std::vector<at::Tensor>& tensors,
                                              int peer, int tag) {
  const char* call = is_send ? "send" : "recv";
  const at::Tensor& t = single_tensor(tensors, call);
  check_rank(peer, getSize(), call);
  TORCH_CHECK(tag >= 0 && tag < (1 << 30), "procgroup ", call, ": tag ", tag,
              " is outside 0..2^30-1");
  pg_buffer_t b = to_buffer(t, Use::kMove, call);
  pg_op_options_t o = op_options(parts_.timeout);
  o.peer = peer;
  o.tag = tag;
  pg_work_t work = nullptr;
  pg_group_t group = group_for(t.device());
  check_issued(is_send ? pg_send(group, &b, &o, &work) : pg_recv(group, &b, &o, &work), call);
  return c10::make_intrusive<PgWork>(work, is_send ? OpType::SEND : OpType::RECV, call, tensors,
                                     std::vector<at::Tensor>{}, nullptr, completer_);
}

WorkPtr ProcessGroupProcgroup::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  return point_to_point(true, tensors, dst_rank, tag);
}

WorkPtr ProcessGroupProcgroup::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  return point_to_point(false, tensors, src_rank, tag);
}

WorkPtr ProcessGroupProcgroup::recvAnysource(std::vector<at::Tensor>&, int) {
  TORCH_CHECK_NOT_IMPLEMENTED(false,
                              "procgroup: recv from any source is not supported; name the "
                              "source rank");
}

}  // namespace procgroup::torch_backend
