// The Python module procgroup_torch._C: ProcessGroupProcgroup, bound as a subclass of
// torch's own ProcessGroup (torch 1.x) or Backend (torch >= 2) so torch.distributed calls
// it like any built-in backend. procgroup_torch/__init__.py registers it.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "process_group.h"

namespace py = pybind11;
using procgroup::torch_backend::ProcessGroupProcgroup;
using procgroup::torch_backend::TorchBackendBase;

PYBIND11_MODULE(_C, m) {
  m.doc() = "procgroup as a torch.distributed backend";
  // The base class must be known to pybind11 before a subclass is bound.
  py::module::import("torch.distributed");
  py::class_<ProcessGroupProcgroup, TorchBackendBase, c10::intrusive_ptr<ProcessGroupProcgroup>>(
      m, "ProcessGroupProcgroup")
      .def(
          py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                      std::chrono::milliseconds timeout, const std::vector<int64_t>& global_ranks) {
            return ProcessGroupProcgroup::create(store, rank, size, timeout, global_ranks);
          }),
          py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
          py::arg("global_ranks") = std::vector<int64_t>{},
          // Creating the group waits for the other ranks: let other Python threads run.
          py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("plugin", &ProcessGroupProcgroup::plugin_name,
                             "The procgroup plugin serving CPU tensors (ucx, gloo, ...)");
}
