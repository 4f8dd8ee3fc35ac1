// The backend a group runs on. A name given (PROCGROUP_BACKEND, pg_group_options_t.backend)
// is loaded as given: PROCGROUP_BACKEND=gloo pins gloo. Without one, a CUDA group gets nccl
// and a CPU group the fastest plugin that works on every rank: ucx where it loads and starts
// on each of them, else gloo. The ranks settle that in the exchange that compares the
// settings they must share (settings_agreement.h), so every rank chooses alike, and rank 0
// logs the choice once ("backend ucx (default: loads and starts on all 2 ranks)"):
//
//   PG_ASSIGN_OR_RETURN(BackendCandidate mine, prepare_backend(config));  // before the store
//   ...
//   PG_ASSIGN_OR_RETURN(BackendChoice choice, agree_on_backend(std::move(mine), config, *store,
//                                                              "pg/<group>/core/settings/"));
//
// "Starts" means a one-rank group of it was created and destroyed here on a private store:
// that catches a context that cannot initialise on this rank (UCX_TLS naming no usable
// transport, no shared memory). Whether the ranks' transports reach each other shows only in
// the real group_create, after the choice. Its failure is an error that names the default and
// how to pin gloo, not a second fallback: a rank failing there leaves the others waiting in
// the store until the group timeout, so the ranks could only agree on gloo after that long.
#pragma once

#include <string>

#include "common/status.h"
#include "loader/loader.h"
#include "rendezvous/env.h"
#include "store/store.h"

namespace procgroup::detail {

// This rank's side of the choice, made before the group's store is opened.
struct BackendCandidate {
  PluginRef plugin;         // the named backend; for the default, ucx when it works here
  bool is_default = false;  // no name given, a CPU group
  std::string trouble;      // default only: why ucx does not work here, "" when it does
};

struct BackendChoice {
  PluginRef plugin;
  std::string default_reason;  // why the default came out this way; "" when a name was given
};

// Loads the named backend (failing here when it does not load), or for a CPU group without
// one, tries ucx: whether it is installed, loads, takes CPU buffers and starts alone.
Result<BackendCandidate> prepare_backend(const GroupConfig& config);

// With every other rank, through store under prefix: fails with PG_ERR_CONFIG when the ranks
// differ in PROCGROUP_DEBUG or the backend given (a name on some ranks, the default on
// others included); settles the default (ucx when it works on all ranks, else gloo, loaded
// here); returns the plugin every rank uses.
Result<BackendChoice> agree_on_backend(BackendCandidate mine, const GroupConfig& config,
                                       Store& store, const std::string& prefix);

// failure, from creating the backend group, with a hint when the default chose it.
Status explain_default(Status failure, const BackendChoice& choice);

}  // namespace procgroup::detail
