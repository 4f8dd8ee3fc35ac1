// gloo_backend.cc — the procgroup gloo plugin: pg_backend_negotiate and the function table,
// built by the backend kit (procgroup_backend_kit.hpp) from GlooGroup (gloo_group.h), so
// every entry runs behind its firewall and reports each error through host->set_error.
#include <gloo/config.h>

#include "gloo_group.h"
#include "procgroup/procgroup_backend_kit.hpp"

namespace procgroup::gloo_backend {
namespace {

#define PG_GLOO_STR2(x) #x
#define PG_GLOO_STR(x) PG_GLOO_STR2(x)
constexpr char kDescription[] =
    "Gloo " PG_GLOO_STR(GLOO_VERSION_MAJOR) "." PG_GLOO_STR(GLOO_VERSION_MINOR) "." PG_GLOO_STR(
        GLOO_VERSION_PATCH) " over TCP; CPU buffers; all ops and dtypes native";
#undef PG_GLOO_STR
#undef PG_GLOO_STR2

// Every operation native and work_on_complete; no group_split (the core makes subgroups
// with group_create).
constexpr pg_backend_ops_t kOps = kit::make_ops<GlooGroup>();

}  // namespace
}  // namespace procgroup::gloo_backend

extern "C" PG_BACKEND_EXPORT pg_status_t pg_backend_negotiate(const pg_backend_negotiate_in_t* in,
                                                              pg_backend_negotiate_out_t* out) {
  namespace gloo_backend = procgroup::gloo_backend;
  // AVG is a sum, then the host's scale_down.
  return procgroup::kit::negotiate(in, out,
                                   {.name = gloo_backend::GlooGroup::kName,
                                    .description = gloo_backend::kDescription,
                                    .ops = &gloo_backend::kOps,
                                    .host_size = procgroup::kit::kHostKernelsSize});
}
