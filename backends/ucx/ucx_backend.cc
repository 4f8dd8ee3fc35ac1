// ucx_backend.cc — the procgroup ucx plugin: pg_backend_negotiate and the function table,
// built by the backend kit (procgroup_backend_kit.hpp) from UcxGroup (ucx_group.h), so
// every entry runs behind its firewall and reports each error through host->set_error.
#include <ucp/api/ucp.h>

#include <array>
#include <cstdio>

#include "procgroup/procgroup_backend_kit.hpp"
#include "ucx_group.h"

namespace procgroup::ucx_backend {
namespace {

// Every operation native; no group_split (the core makes subgroups with group_create) and
// no work_on_complete (works progress in the waiter, so the core waits for them).
constexpr pg_backend_ops_t kOps = kit::make_ops<UcxGroup>();

// Built once, without allocating: negotiate must not throw.
const char* description() {
  static const auto text = [] {
    std::array<char, 192> buffer{};
    std::snprintf(buffer.data(), buffer.size(),
                  "UCX %s (UCP tag matching, own collective algorithms); CPU buffers; all ops, "
                  "dtypes and reduce ops native",
                  ucp_get_version_string());
    return buffer;
  }();
  return text.data();
}

}  // namespace
}  // namespace procgroup::ucx_backend

extern "C" PG_BACKEND_EXPORT pg_status_t pg_backend_negotiate(const pg_backend_negotiate_in_t* in,
                                                              pg_backend_negotiate_out_t* out) {
  using namespace procgroup::ucx_backend;
  return procgroup::kit::negotiate(in, out,
                                   {.name = UcxGroup::kName,
                                    .description = description(),
                                    .ops = &kOps,
                                    .host_size = procgroup::kit::kHostKernelsSize});
}
