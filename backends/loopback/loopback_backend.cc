// pg_backend_negotiate and the function table: the plugin's only contact with the core,
// built by the backend kit from RankGroup (procgroup_backend_kit.hpp), so every entry runs
// behind its firewall and reports each error through host->set_error.
//
// Built twice: "loopback" (every operation native, and group_split) and, with
// PG_LOOPBACK_P2P_ONLY, "loopback_p2p" (send and recv only; the core emulates every
// collective over them and makes subgroups with group_create).
#include "loopback_group.h"
#include "procgroup/procgroup_backend_kit.hpp"

namespace procgroup::loopback {
namespace {

constexpr const char* kDescription =
    kP2pOnly ? "in-process reference backend (ranks are threads of one process), send/recv only"
             : "in-process reference backend (ranks are threads of one process)";

// loopback_p2p leaves group_split out, so its subgroups keep taking the core's group_create
// path; no work_on_complete: the core waits for works on its own thread.
constexpr pg_backend_ops_t kOps = kit::make_ops<RankGroup>(
    kP2pOnly ? kit::kP2pOps : kit::kAllOps, {.split = !kP2pOnly, .on_complete = false});

}  // namespace
}  // namespace procgroup::loopback

extern "C" PG_BACKEND_EXPORT pg_status_t pg_backend_negotiate(const pg_backend_negotiate_in_t* in,
                                                              pg_backend_negotiate_out_t* out) {
  namespace loopback = procgroup::loopback;
  return procgroup::kit::negotiate(in, out,
                                   {.name = loopback::RankGroup::kName,
                                    .description = loopback::kDescription,
                                    .ops = &loopback::kOps,
                                    .host_size = procgroup::kit::kHostKernelsSize});
}
