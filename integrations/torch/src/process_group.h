// ProcessGroupProcgroup: torch.distributed's "procgroup" backend. Every torch collective
// runs as one procgroup operation on a group created through torch's own store; the plugin
// is PROCGROUP_BACKEND's (ucx, gloo, nccl, loopback or a path to anyone's .so).
//
// CPU tensors go to a group created with the process group (PROCGROUP_BACKEND; unset:
// procgroup's CPU default, ucx where it works on every rank, else gloo; nccl: gloo); CUDA tensors
// to a second group created at the first CUDA call (PROCGROUP_BACKEND, nccl when unset) on the
// tensor's device and torch's current stream. torch 1.x subclasses c10d::ProcessGroup, torch >= 2
// c10d::Backend; the overridden methods are the same.
#pragma once

#include <torch/version.h>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "procgroup/procgroup.h"
#include "torch_store.h"
#include "work.h"

namespace procgroup::torch_backend {

#if TORCH_VERSION_MAJOR >= 2
using TorchBackendBase = c10d::Backend;
#else
using TorchBackendBase = c10d::ProcessGroup;
#endif

using WorkPtr = c10::intrusive_ptr<c10d::Work>;

class ProcessGroupProcgroup : public TorchBackendBase {
 public:
  // What a group is made of, all created before the object: torch 2.x crashes (SIGSEGV)
  // when the constructor of a Backend subclass throws, so the constructor never does.
  struct Parts {
    std::unique_ptr<TorchStore> store;  // outlives the groups made through it
    std::chrono::milliseconds timeout{0};
    int local_rank = 0;
    int local_size = 1;
    pg_group_t cpu_group = nullptr;
    std::shared_ptr<Completer> completer;
  };

  // global_ranks: the world ranks of this group's members (empty: the world group itself),
  // used to tell which members share this host. Throws c10::Error when the group cannot
  // be made (the message says why).
  static c10::intrusive_ptr<ProcessGroupProcgroup> create(
      const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
      std::chrono::milliseconds timeout, const std::vector<int64_t>& global_ranks);
  ProcessGroupProcgroup(int rank, int size, Parts parts) noexcept;
  ~ProcessGroupProcgroup() override;

  const std::string getBackendName() const override { return "procgroup"; }
  // The plugin serving CPU tensors ("ucx", "gloo", ...).
  std::string plugin_name() const;

  WorkPtr broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override;
  WorkPtr allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override;
  WorkPtr allreduce_coalesced(std::vector<at::Tensor>& tensors,
                              const c10d::AllreduceCoalescedOptions& opts) override;
  WorkPtr reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  WorkPtr allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                    const c10d::AllgatherOptions& opts) override;
  WorkPtr _allgather_base(at::Tensor& output, at::Tensor& input,
                          const c10d::AllgatherOptions& opts) override;
  WorkPtr allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                              std::vector<at::Tensor>& inputs,
                              const c10d::AllgatherOptions& opts) override;
  WorkPtr gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                 const c10d::GatherOptions& opts) override;
  WorkPtr scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                  const c10d::ScatterOptions& opts) override;
  WorkPtr reduce_scatter(std::vector<at::Tensor>& outputs,
                         std::vector<std::vector<at::Tensor>>& inputs,
                         const c10d::ReduceScatterOptions& opts) override;
  WorkPtr _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                               const c10d::ReduceScatterOptions& opts) override;
  WorkPtr alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
                        std::vector<int64_t>& input_splits,
                        const c10d::AllToAllOptions& opts) override;
  WorkPtr alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                   const c10d::AllToAllOptions& opts) override;
  WorkPtr barrier(const c10d::BarrierOptions& opts) override;
  WorkPtr send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  WorkPtr recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;
  WorkPtr recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;

  // coalescing.cc: calls procgroup runs as one operation per tensor, under one work.
#if TORCH_VERSION_MAJOR >= 2
  // torch 2.x's _coalescing_manager(device=...): the works of every call between the two
  // (each still issued at once, in order) become endCoalescing's one work.
  void startCoalescing() override;
  WorkPtr endCoalescing() override;
  WorkPtr allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllgatherOptions& opts) override;
  WorkPtr reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::ReduceScatterOptions& opts) override;
#endif

 private:
  using Issue = pg_status_t (*)(pg_group_t, const pg_buffer_t*, const pg_buffer_t*,
                                const pg_op_options_t*, pg_work_t*);

  // Throws c10::Error naming what failed.
  static pg_group_t create_group(const Parts& parts, int rank, int size, bool cuda,
                                 int device_index);
  // The group serving tensors on device (creating the CUDA one at its first use).
  pg_group_t group_for(const at::Device& device);
  // Issues one procgroup op and wraps its work: see PgWork for outputs, keep, on_success.
  WorkPtr run(c10d::OpType type, const char* call, Issue issue, pg_group_t group,
              const pg_buffer_t* input, const pg_buffer_t* output, const pg_op_options_t& opts,
              std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep,
              std::function<void()> on_success = nullptr);
  WorkPtr point_to_point(bool send, std::vector<at::Tensor>& tensors, int peer, int tag);

  Parts parts_;
  pg_group_t cpu_group_ = nullptr;
  std::mutex cuda_mutex_;
  pg_group_t cuda_group_ = nullptr;
  int cuda_device_ = -1;
  std::shared_ptr<Completer> completer_;
  std::mutex coalescing_mutex_;
  bool coalescing_ = false;         // between startCoalescing and endCoalescing
  std::vector<WorkPtr> coalesced_;  // the works issued meanwhile
};

}  // namespace procgroup::torch_backend
