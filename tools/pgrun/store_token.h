// The rendezvous store's shared secret for a job (PROCGROUP_STORE_TOKEN, DESIGN.md §5).
// With --store-token auto (the default), a single-node job whose environment has no token
// gets a fresh random one, so only its own ranks can use rank 0's store; a token already
// in the environment is passed through; a multi-node job cannot agree on a generated one,
// so there the user sets it on every node. The token is never printed.
//
//   TokenDecision d = decide_store_token(options);
//   if (!d.error.empty()) fail(d.error);
//   if (!d.env_entry.empty()) overrides.push_back(d.env_entry);   // PROCGROUP_STORE_TOKEN=...
#pragma once

#include <string>

#include "options.h"

namespace procgroup::pgrun {

struct TokenDecision {
  std::string env_entry;  // "PROCGROUP_STORE_TOKEN=<64 hex digits>", or "" to add nothing
  std::string note;       // one line for pgrun's stderr, or ""
  std::string error;      // the system could not supply randomness
};

TokenDecision decide_store_token(const Options& options);

}  // namespace procgroup::pgrun
