// The calls torch makes with several tensors that procgroup runs as one operation per tensor
// (allgather_coalesced; torch 2.x: the *_tensor_coalesced calls its _coalescing_manager makes,
// and startCoalescing/endCoalescing), each answered with one CoalescedWork over the parts.
// Every tensor is checked before the first part is issued, so a refused call sends nothing.
#include "process_group.h"
#include "tensors.h"

namespace procgroup::torch_backend {

WorkPtr ProcessGroupProcgroup::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  constexpr const char* kCall = "allgather_coalesced";
  TORCH_CHECK(!inputs.empty(), "procgroup ", kCall, ": no input tensors");
  TORCH_CHECK(output_lists.size() == static_cast<size_t>(getSize()), "procgroup ", kCall,
              ": the output must hold one list per rank (", getSize(), "), got ",
              output_lists.size());
  // torch lays the output out by rank, then by input: output_lists[rank][i].
  std::vector<std::vector<at::Tensor>> by_input(inputs.size());
  for (const std::vector<at::Tensor>& of_rank : output_lists) {
    TORCH_CHECK(of_rank.size() == inputs.size(), "procgroup ", kCall, ": each rank's output list ",
                "must hold one tensor per input (", inputs.size(), "), got ", of_rank.size());
    for (size_t i = 0; i < inputs.size(); ++i) by_input[i].push_back(of_rank[i]);
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_same_layout(by_input[i], inputs[i], kCall);
    (void)to_buffer(inputs[i], Use::kMove, kCall);
  }
  std::vector<WorkPtr> parts;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<std::vector<at::Tensor>> outputs{by_input[i]};
    std::vector<at::Tensor> input{inputs[i]};
    parts.push_back(allgather(outputs, input, opts));
  }
  return c10::make_intrusive<CoalescedWork>(c10d::OpType::ALLGATHER_COALESCED, std::move(parts));
}

#if TORCH_VERSION_MAJOR >= 2
void ProcessGroupProcgroup::startCoalescing() {
  std::lock_guard lock(coalescing_mutex_);
  TORCH_CHECK(!coalescing_, "procgroup startCoalescing: already coalescing (call endCoalescing)");
  coalescing_ = true;
  coalesced_.clear();
}

WorkPtr ProcessGroupProcgroup::endCoalescing() {
  std::vector<WorkPtr> parts;
  {
    std::lock_guard lock(coalescing_mutex_);
    TORCH_CHECK(coalescing_, "procgroup endCoalescing: startCoalescing was not called");
    coalescing_ = false;
    parts.swap(coalesced_);
  }
  return c10::make_intrusive<CoalescedWork>(c10d::OpType::UNKNOWN, std::move(parts));
}

WorkPtr ProcessGroupProcgroup::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                               std::vector<at::Tensor>& inputs,
                                                               const c10d::AllgatherOptions& opts) {
  constexpr const char* kCall = "allgather_into_tensor_coalesced";
  TORCH_CHECK(outputs.size() == inputs.size(), "procgroup ", kCall, ": ", outputs.size(),
              " outputs for ", inputs.size(), " inputs");
  for (size_t i = 0; i < inputs.size(); ++i)
    check_pair(outputs[i], "output", inputs[i], getSize(), kCall);
  std::vector<WorkPtr> parts;
  for (size_t i = 0; i < inputs.size(); ++i)
    parts.push_back(_allgather_base(outputs[i], inputs[i], opts));
  return c10::make_intrusive<CoalescedWork>(c10d::OpType::ALLGATHER_COALESCED, std::move(parts));
}

WorkPtr ProcessGroupProcgroup::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  constexpr const char* kCall = "reduce_scatter_tensor_coalesced";
  TORCH_CHECK(outputs.size() == inputs.size(), "procgroup ", kCall, ": ", outputs.size(),
              " outputs for ", inputs.size(), " inputs");
  for (size_t i = 0; i < inputs.size(); ++i)
    check_pair(inputs[i], "input", outputs[i], getSize(), kCall);
  std::vector<WorkPtr> parts;
  for (size_t i = 0; i < inputs.size(); ++i)
    parts.push_back(_reduce_scatter_base(outputs[i], inputs[i], opts));
  return c10::make_intrusive<CoalescedWork>(c10d::OpType::_REDUCE_SCATTER_BASE, std::move(parts));
}
#endif

}  // namespace procgroup::torch_backend
