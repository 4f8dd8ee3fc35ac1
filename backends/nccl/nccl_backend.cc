// nccl_backend.cc — the procgroup nccl plugin: pg_backend_negotiate and the function table,
// built by the backend kit (procgroup_backend_kit.hpp) from Group (nccl_group.h), so every
// entry runs behind its firewall and reports each error through host->set_error. Loading
// needs no GPU (only libcudart and libnccl); a host without a CUDA device fails
// group_create with PG_ERR_UNSUPPORTED "no CUDA device: ...".
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "nccl_group.h"
#include "procgroup/procgroup_backend_kit.hpp"

namespace procgroup::nccl_backend {
namespace {

#define PG_NCCL_STR2(x) #x
#define PG_NCCL_STR(x) PG_NCCL_STR2(x)
constexpr char kDescription[] =
    "NCCL " PG_NCCL_STR(NCCL_MAJOR) "." PG_NCCL_STR(NCCL_MINOR) "." PG_NCCL_STR(
        NCCL_PATCH) " (headers), CUDA runtime " PG_NCCL_STR(CUDART_VERSION)
        "; CUDA device buffers only; all ops, dtypes and reduce ops native";
#undef PG_NCCL_STR
#undef PG_NCCL_STR2

// Every operation native and group_split (ncclCommSplit); no work_on_complete: completion
// is a CUDA event, found by polling.
constexpr pg_backend_ops_t kOps = kit::make_ops<Group>();

}  // namespace
}  // namespace procgroup::nccl_backend

extern "C" PG_BACKEND_EXPORT pg_status_t pg_backend_negotiate(const pg_backend_negotiate_in_t* in,
                                                              pg_backend_negotiate_out_t* out) {
  using namespace procgroup::nccl_backend;
  return procgroup::kit::negotiate(
      in, out,
      {.name = Group::kName, .description = kDescription, .ops = &kOps,
       .devices = 1u << PG_DEVICE_CUDA});
}
