// Turns pg_group_options_t plus the process environment into a complete GroupConfig.
// Sources, in order: explicit options, torchrun variables (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), then Open MPI (OMPI_COMM_WORLD_RANK, _SIZE,
// _LOCAL_RANK, _LOCAL_SIZE), then Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
// SLURM_NTASKS_PER_NODE...): mpirun inside a Slurm allocation inherits the step's SLURM_*
// variables, while OMPI_* are each rank's own. Also PROCGROUP_BACKEND, PROCGROUP_TIMEOUT
// (seconds), PROCGROUP_STORE_TOKEN, PROCGROUP_DEBUG (off | detail), PROCGROUP_LOG_LEVEL
// (only checked here), PROCGROUP_TRACE_DIR, PROCGROUP_TIMELINE, and torchrun's
// TORCHELASTIC_USE_AGENT_STORE and TORCHELASTIC_RESTART_COUNT (agent_store.h): without an
// explicit store_url, a job of several ranks then joins the agent's store.
// Every missing or malformed value gives PG_ERR_CONFIG naming the variable and what
// would set it.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "common/deadline.h"
#include "common/status.h"
#include "procgroup/procgroup.h"

namespace procgroup::detail {

// The longest timeout any setting may ask for (~31 years; docs/errors.md): a deadline this
// far ahead still fits the steady clock's int64 nanoseconds. Longer ones are refused.
inline constexpr Millis kMaxTimeout{1'000'000'000'000};

// Looks a variable up; the default reads the process environment. Injectable for tests.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;
EnvLookup process_env();

struct GroupConfig {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  std::string master_addr;     // resolved: never empty
  int master_port = 29500;
  std::string store_url;       // resolved: tcp://addr:port, c10d://addr:port/... (torchrun's
                               // agent store), file:///..., or memory: (size 1)
  std::string backend;         // as given (name or path); empty: the caller picks the default
  std::string store_token;
  Millis timeout{300000};
  std::string timeout_source;  // for messages: which setting gave the timeout
  int device_type = -1;        // -1: no hint
  std::string name = "world";
  std::string launcher;        // "options", "torchrun", "slurm" or "openmpi": where rank came from
  bool debug_detail = false;   // PROCGROUP_DEBUG=detail: check every collective's fingerprint
  std::string trace_dir;       // PROCGROUP_TRACE_DIR: where hang reports are written (if set)
  std::string timeline_path;   // PROCGROUP_TIMELINE: Chrome trace path prefix (empty: off)
};

Result<GroupConfig> resolve_group_config(const pg_group_options_t* options,
                                         const EnvLookup& env);

}  // namespace procgroup::detail
