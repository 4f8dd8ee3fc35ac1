// torchrun's agent store. Under torchrun's default launch (static rendezvous) the elastic
// agent hosts a c10d TCPStore on MASTER_ADDR:MASTER_PORT and tells its workers so with
// TORCHELASTIC_USE_AGENT_STORE=True; a rank that tried to start procgroup's own store there
// would fail with "Address already in use". resolve_group_config() (env.h) then gives every
// rank a c10d:// store URL instead, and no rank binds MASTER_PORT.
//
//   PG_ASSIGN_OR_RETURN(auto url, agent_store_url(env, "127.0.0.1", 29500, /*has_token=*/false));
//   // with TORCHELASTIC_USE_AGENT_STORE=True and TORCHELASTIC_RESTART_COUNT=2:
//   // "c10d://127.0.0.1:29500/procgroup/attempt_2/?agent"
#pragma once

#include <optional>
#include <string>

#include "common/status.h"
#include "rendezvous/env.h"

namespace procgroup::detail {

// The agent store's URL when TORCHELASTIC_USE_AGENT_STORE is "True", nullopt otherwise. Our
// keys go under "procgroup/attempt_<TORCHELASTIC_RESTART_COUNT>/", so a restarted job never
// reads the keys of an attempt before it (torch's own workers use "/worker/attempt_<N>/").
// PG_ERR_CONFIG when has_token (torch's store cannot check PROCGROUP_STORE_TOKEN) or for a
// malformed TORCHELASTIC_RESTART_COUNT.
Result<std::optional<std::string>> agent_store_url(const EnvLookup& env,
                                                   const std::string& master_addr, int master_port,
                                                   bool has_token);

}  // namespace procgroup::detail
