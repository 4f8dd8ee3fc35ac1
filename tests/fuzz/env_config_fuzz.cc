// libFuzzer target: resolve_group_config with a fuzzed environment (every variable it
// reads, with arbitrary values) and fuzzed pg_group_options_t fields. Either the result is
// a usable configuration (the invariants the core relies on, checked below) or the error
// is PG_ERR_CONFIG / PG_ERR_INVALID_ARGUMENT with a message. (A store URL given in the
// options is passed through: open_store checks it.)
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "rendezvous/env.h"

namespace {

using namespace procgroup::detail;

const char* const kNames[] = {"RANK",
                              "WORLD_SIZE",
                              "LOCAL_RANK",
                              "LOCAL_WORLD_SIZE",
                              "MASTER_ADDR",
                              "MASTER_PORT",
                              "OMPI_COMM_WORLD_RANK",
                              "OMPI_COMM_WORLD_SIZE",
                              "OMPI_COMM_WORLD_LOCAL_RANK",
                              "OMPI_COMM_WORLD_LOCAL_SIZE",
                              "SLURM_PROCID",
                              "SLURM_NTASKS",
                              "SLURM_LOCALID",
                              "SLURM_NTASKS_PER_NODE",
                              "SLURM_TASKS_PER_NODE",
                              "SLURM_NNODES",
                              "SLURM_NODEID",
                              "PROCGROUP_BACKEND",
                              "PROCGROUP_TIMEOUT",
                              "PROCGROUP_STORE_TOKEN",
                              "PROCGROUP_DEBUG",
                              "PROCGROUP_TRACE_DIR",
                              "PROCGROUP_LOG_LEVEL",
                              "PROCGROUP_TIMELINE"};

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "env_config_fuzz: %s\n", what);
  std::abort();
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  std::map<std::string, std::string> env;
  const int count = in.ConsumeIntegralInRange(0, 24);
  for (int i = 0; i < count; ++i) {
    const char* name = in.PickValueInArray(kNames);
    env[name] = in.ConsumeRandomLengthString(32);
  }
  pg_group_options_t opts = PG_GROUP_OPTIONS_INIT;
  std::string addr, url, backend, token, name;
  const bool use_options = in.ConsumeBool();
  if (use_options) {
    opts.rank = in.ConsumeIntegral<int32_t>();
    opts.size = in.ConsumeIntegralInRange<int32_t>(-2, 70000);
    opts.local_rank = in.ConsumeIntegral<int32_t>();
    opts.local_size = in.ConsumeIntegralInRange<int32_t>(-2, 70000);
    opts.master_port = in.ConsumeIntegral<int32_t>();
    opts.timeout_ms = in.ConsumeIntegral<int64_t>();
    opts.device_type = in.ConsumeIntegralInRange<int32_t>(-3, 5);
    addr = in.ConsumeRandomLengthString(24);
    url = in.ConsumeRandomLengthString(24);
    backend = in.ConsumeRandomLengthString(16);
    token = in.ConsumeRandomLengthString(16);
    name = in.ConsumeRandomLengthString(16);
    const uint8_t present = in.ConsumeIntegral<uint8_t>();
    if (present & 1) opts.master_addr = addr.c_str();
    if (present & 2) opts.store_url = url.c_str();
    if (present & 4) opts.backend = backend.c_str();
    if (present & 8) opts.store_token = token.c_str();
    if (present & 16) opts.name = name.c_str();
  }
  EnvLookup lookup = [&env](const char* var) -> std::optional<std::string> {
    auto it = env.find(var);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  Result<GroupConfig> r = resolve_group_config(use_options ? &opts : nullptr, lookup);
  if (!r.ok()) {
    const pg_status_t code = r.status().code();
    if (code != PG_ERR_CONFIG && code != PG_ERR_INVALID_ARGUMENT) fail("unexpected status");
    if (r.status().message().empty()) fail("an error without a message");
    return 0;
  }
  const GroupConfig& c = r.value();
  if (c.size < 1 || c.rank < 0 || c.rank >= c.size) fail("rank outside 0..size");
  if (c.local_size < 1 || c.local_rank < 0 || c.local_rank >= c.local_size) fail("local rank");
  if (c.master_addr.empty()) fail("empty master address");
  if (c.master_port < 1 || c.master_port > 65535) fail("master port outside 1..65535");
  if (c.timeout.count() <= 0) fail("timeout not positive");
  if (c.store_url.empty()) fail("empty store url");
  // A URL from the options is the caller's and is checked when the store opens; one made
  // here must be of a known kind, and in memory only for a group of one.
  const bool url_given = opts.store_url != nullptr && *opts.store_url != '\0';
  if (!url_given) {
    if (!starts_with(c.store_url, "tcp://") && !starts_with(c.store_url, "memory:")) {
      fail("store url of unknown kind");
    }
    if (starts_with(c.store_url, "memory:") && c.size != 1) fail("memory store for size > 1");
    if (starts_with(c.store_url, "tcp://") &&
        c.store_url.find(c.master_addr) == std::string::npos) {
      fail("tcp store url without the master address");
    }
  }
  return 0;
}
