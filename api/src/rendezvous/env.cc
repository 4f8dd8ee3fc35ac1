#include "rendezvous/env.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/log.h"
#include "rendezvous/agent_store.h"
#include "store/store_protocol.h"

namespace procgroup::detail {
namespace {

constexpr int kDefaultPort = 29500;
constexpr Millis kDefaultTimeout{300000};
constexpr double kMaxTimeoutSeconds = kMaxTimeout.count() / 1000.0;
// A variable's value as messages quote it: escaped and cut short, as the store quotes keys
// ("'123...'... (100001 bytes)"), so a 100 KB value does not become a 100 KB message.
std::string shown(std::string_view value) { return printable_key(value); }

// Where rank and size came from, and who to blame for a missing variable.
struct Placement {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  bool single_node = false;  // known to run on one node (for the MASTER_ADDR default)
  std::string launcher;
};

// The variables of one launcher that sets rank and size through four variables.
struct LauncherVars {
  const char* launcher;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;
  const char* who;  // the launcher that sets them, for messages
};

constexpr LauncherVars kTorchrun{
    "torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "torchrun and pgrun"};
constexpr LauncherVars kOpenMpi{"openmpi",
                                "OMPI_COMM_WORLD_RANK",
                                "OMPI_COMM_WORLD_SIZE",
                                "OMPI_COMM_WORLD_LOCAL_RANK",
                                "OMPI_COMM_WORLD_LOCAL_SIZE",
                                "Open MPI's mpirun"};

class Env {
 public:
  explicit Env(const EnvLookup& lookup) : lookup_(lookup) {}

  std::optional<std::string> get(const char* name) const { return lookup_(name); }
  // Empty counts as unset for strings.
  std::optional<std::string> text(const char* name) const {
    auto v = get(name);
    if (v && v->empty()) return std::nullopt;
    return v;
  }

  Result<std::optional<int>> integer(const char* name, const char* who) const {
    auto v = get(name);
    if (!v) return std::optional<int>();
    int out = 0;
    const char* end = v->data() + v->size();
    auto [ptr, ec] = std::from_chars(v->data(), end, out);
    if (ec == std::errc::result_out_of_range && ptr == end) {
      return make_error(PG_ERR_CONFIG, "{}={} is outside {}..{} (set by {})", name, shown(*v),
                        INT32_MIN, INT32_MAX, who);
    }
    if (v->empty() || ec != std::errc() || ptr != end) {
      return make_error(PG_ERR_CONFIG, "{}={} is not an integer (set by {})", name, shown(*v), who);
    }
    return std::optional<int>(out);
  }

 private:
  const EnvLookup& lookup_;
};

Status missing(const char* absent, const char* present, const char* who) {
  return make_error(PG_ERR_CONFIG, "{} is set but {} is not; set {} too (both are set by {})",
                    present, absent, absent, who);
}

// Checks the ranges of a placement read from variables named by vars.
Status check_ranges(const Placement& p, const LauncherVars& vars) {
  if (p.size < 1) {
    return make_error(PG_ERR_CONFIG, "{}={} must be at least 1", vars.size, p.size);
  }
  if (p.rank < 0 || p.rank >= p.size) {
    return make_error(PG_ERR_CONFIG, "{}={} is outside 0..{} ({}={})", vars.rank, p.rank,
                      p.size - 1, vars.size, p.size);
  }
  if (p.local_size < 1 || p.local_size > p.size) {
    return make_error(PG_ERR_CONFIG, "{}={} is outside 1..{} ({}={})", vars.local_size,
                      p.local_size, p.size, vars.size, p.size);
  }
  if (p.local_rank < 0 || p.local_rank >= p.local_size) {
    return make_error(PG_ERR_CONFIG, "{}={} is outside 0..{} ({}={})", vars.local_rank,
                      p.local_rank, p.local_size - 1, vars.local_size, p.local_size);
  }
  return ok_status();
}

// torchrun or Open MPI: nullopt when neither rank nor size is set.
Result<std::optional<Placement>> from_vars(const Env& env, const LauncherVars& v) {
  PG_ASSIGN_OR_RETURN(auto rank, env.integer(v.rank, v.who));
  PG_ASSIGN_OR_RETURN(auto size, env.integer(v.size, v.who));
  if (!rank && !size) return std::optional<Placement>();
  if (!rank) return missing(v.rank, v.size, v.who);
  if (!size) return missing(v.size, v.rank, v.who);
  PG_ASSIGN_OR_RETURN(auto local_rank, env.integer(v.local_rank, v.who));
  PG_ASSIGN_OR_RETURN(auto local_size, env.integer(v.local_size, v.who));
  if (local_rank && !local_size) return missing(v.local_size, v.local_rank, v.who);
  if (local_size && !local_rank) return missing(v.local_rank, v.local_size, v.who);
  Placement p;
  p.launcher = v.launcher;
  p.rank = *rank;
  p.size = *size;
  // Neither local variable: a hand-made single-node launch (RANK and WORLD_SIZE only).
  p.local_rank = local_rank.value_or(*rank);
  p.local_size = local_size.value_or(*size);
  PG_RETURN_IF_ERROR(check_ranges(p, v));
  p.single_node = p.local_size == p.size;
  return std::optional<Placement>(p);
}

// SLURM_TASKS_PER_NODE, e.g. "4(x2),3": tasks on each node in node order.
Result<std::vector<int>> tasks_per_node(const std::string& text) {
  auto bad = [&] {
    return make_error(PG_ERR_CONFIG,
                      "SLURM_TASKS_PER_NODE={} is not like '4(x2),3' (set by srun)", shown(text));
  };
  std::vector<int> out;
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end) {
    int tasks = 0;
    int repeat = 1;
    auto r = std::from_chars(p, end, tasks);
    if (r.ec != std::errc() || tasks < 1) return bad();
    p = r.ptr;
    if (p < end && *p == '(') {
      if (end - p < 3 || p[1] != 'x') return bad();
      auto rr = std::from_chars(p + 2, end, repeat);
      if (rr.ec != std::errc() || repeat < 1 || rr.ptr == end || *rr.ptr != ')') return bad();
      p = rr.ptr + 1;
    }
    if (repeat > 1 << 20) return bad();
    out.insert(out.end(), static_cast<size_t>(repeat), tasks);
    if (p < end) {
      if (*p != ',' || p + 1 == end) return bad();
      ++p;
    }
  }
  if (out.empty()) return bad();
  return out;
}

Result<std::optional<Placement>> from_slurm(const Env& env) {
  const char* who = "srun";
  PG_ASSIGN_OR_RETURN(auto rank, env.integer("SLURM_PROCID", who));
  PG_ASSIGN_OR_RETURN(auto size, env.integer("SLURM_NTASKS", who));
  if (!rank && !size) return std::optional<Placement>();
  if (!rank) return missing("SLURM_PROCID", "SLURM_NTASKS", who);
  if (!size) return missing("SLURM_NTASKS", "SLURM_PROCID", who);
  PG_ASSIGN_OR_RETURN(auto nodes, env.integer("SLURM_NNODES", who));
  PG_ASSIGN_OR_RETURN(auto local_rank, env.integer("SLURM_LOCALID", who));
  PG_ASSIGN_OR_RETURN(auto per_node, env.integer("SLURM_NTASKS_PER_NODE", "--ntasks-per-node"));
  if (nodes && *nodes < 1) {
    return make_error(PG_ERR_CONFIG, "SLURM_NNODES={} must be at least 1 (set by srun)", *nodes);
  }
  bool one_node = nodes && *nodes == 1;
  LauncherVars vars{"slurm",         "SLURM_PROCID",          "SLURM_NTASKS",
                    "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", who};
  Placement p;
  p.launcher = "slurm";
  p.rank = *rank;
  p.size = *size;
  if (per_node) {
    p.local_size = *per_node;
  } else if (auto text = env.text("SLURM_TASKS_PER_NODE")) {
    PG_ASSIGN_OR_RETURN(std::vector<int> counts, tasks_per_node(*text));
    vars.local_size = "SLURM_TASKS_PER_NODE";
    // This node's count when SLURM_NODEID says which node we are; else the first.
    PG_ASSIGN_OR_RETURN(auto node_id, env.integer("SLURM_NODEID", who));
    bool known = node_id && *node_id >= 0 && static_cast<size_t>(*node_id) < counts.size();
    p.local_size = counts[known ? static_cast<size_t>(*node_id) : 0];
  } else if (one_node) {
    p.local_size = *size;
  } else {
    return make_error(PG_ERR_CONFIG,
                      "SLURM_PROCID is set but neither SLURM_NTASKS_PER_NODE nor "
                      "SLURM_TASKS_PER_NODE is (srun sets SLURM_TASKS_PER_NODE)");
  }
  if (local_rank) {
    p.local_rank = *local_rank;
  } else if (one_node) {
    p.local_rank = *rank;
  } else {
    return missing("SLURM_LOCALID", "SLURM_PROCID", who);
  }
  PG_RETURN_IF_ERROR(check_ranges(p, vars));
  p.single_node = one_node || p.local_size == p.size;
  return std::optional<Placement>(p);
}

Result<Placement> from_options(const pg_group_options_t& o) {
  Placement p;
  p.launcher = "options";
  p.size = o.size;
  p.rank = o.rank;
  if (o.rank < 0 || o.rank >= o.size) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "options->rank {} is outside 0..{} (size {})",
                      o.rank, o.size - 1, o.size);
  }
  if (o.local_size < 0 || o.local_size > o.size) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "options->local_size {} is outside 0..{}",
                      o.local_size, o.size);
  }
  // local_size 0: one node, so the local rank is the rank unless given.
  p.local_size = o.local_size == 0 ? o.size : o.local_size;
  p.local_rank = (o.local_size == 0 && o.local_rank == 0) ? o.rank : o.local_rank;
  if (p.local_rank < 0 || p.local_rank >= p.local_size) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "options->local_rank {} is outside 0..{}",
                      p.local_rank, p.local_size - 1);
  }
  p.single_node = p.local_size == p.size;
  return p;
}

Result<Placement> placement(const pg_group_options_t& o, const Env& env) {
  if (o.size < 0) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "options->size {} is negative", o.size);
  }
  if (o.size > 0) return from_options(o);
  PG_ASSIGN_OR_RETURN(auto torchrun, from_vars(env, kTorchrun));
  if (torchrun) return *torchrun;
  // Open MPI before Slurm: mpirun inside a Slurm allocation leaves the batch step's (or its
  // daemon's) SLURM_PROCID in every rank's environment, while OMPI_* are the rank's own.
  PG_ASSIGN_OR_RETURN(auto openmpi, from_vars(env, kOpenMpi));
  if (openmpi) return *openmpi;
  PG_ASSIGN_OR_RETURN(auto slurm, from_slurm(env));
  if (slurm) return *slurm;
  return make_error(PG_ERR_CONFIG,
                    "no rank and world size: set RANK and WORLD_SIZE (torchrun and pgrun do), "
                    "run under srun (SLURM_PROCID, SLURM_NTASKS) or mpirun "
                    "(OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE), or set size in "
                    "pg_group_options_t");
}

Result<Millis> timeout_from(const pg_group_options_t& o, const Env& env) {
  if (o.timeout_ms < 0) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "options->timeout_ms {} is negative", o.timeout_ms);
  }
  if (o.timeout_ms > kMaxTimeout.count()) {
    return make_error(PG_ERR_INVALID_ARGUMENT,
                      "options->timeout_ms {} is longer than the longest timeout, {} ms (~31 "
                      "years)",
                      o.timeout_ms, kMaxTimeout.count());
  }
  if (o.timeout_ms > 0) return Millis(o.timeout_ms);
  auto text = env.get("PROCGROUP_TIMEOUT");
  if (!text) return kDefaultTimeout;
  double seconds = 0;
  const char* end = text->data() + text->size();
  auto [ptr, ec] = std::from_chars(text->data(), end, seconds);
  // Beyond double's range (1e999, or 1e-999 below it), from_chars leaves seconds unset.
  if (ec == std::errc::result_out_of_range && ptr == end) {
    seconds = std::strtod(text->c_str(), nullptr);  // +-HUGE_VAL or about 0
    ec = std::errc();
  }
  if (!text->empty() && ec == std::errc() && ptr == end && seconds > kMaxTimeoutSeconds) {
    return make_error(PG_ERR_CONFIG,
                      "PROCGROUP_TIMEOUT={} is longer than the longest timeout, {:.0f} seconds "
                      "(~31 years)",
                      shown(*text), kMaxTimeoutSeconds);
  }
  if (text->empty() || ec != std::errc() || ptr != end || std::isnan(seconds) || seconds <= 0) {
    return make_error(PG_ERR_CONFIG,
                      "PROCGROUP_TIMEOUT={} is not a positive number of seconds (e.g. 300 "
                      "or 0.5)",
                      shown(*text));
  }
  return Millis(std::max<int64_t>(1, static_cast<int64_t>(std::ceil(seconds * 1000.0))));
}

Result<int> port_from(const pg_group_options_t& o, const Env& env) {
  if (o.master_port < 0 || o.master_port > 65535) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "options->master_port {} is outside 1..65535",
                      o.master_port);
  }
  if (o.master_port > 0) return o.master_port;
  PG_ASSIGN_OR_RETURN(auto port, env.integer("MASTER_PORT", "torchrun and pgrun"));
  if (!port) return kDefaultPort;
  if (*port < 1 || *port > 65535) {
    return make_error(PG_ERR_CONFIG, "MASTER_PORT={} is outside 1..65535", *port);
  }
  return *port;
}

std::optional<std::string> option_text(const char* s) {
  if (s == nullptr || *s == '\0') return std::nullopt;
  return std::string(s);
}

// The tcp:// URL's host, for a master_addr taken from an explicit store URL.
std::optional<std::string> tcp_host(const std::string& url) {
  constexpr std::string_view kTcp = "tcp://";
  if (url.rfind(kTcp, 0) != 0) return std::nullopt;
  std::string rest = url.substr(kTcp.size());
  if (!rest.empty() && rest.front() == '[') {
    size_t close = rest.find(']');
    if (close == std::string::npos || close == 1) return std::nullopt;
    return rest.substr(1, close - 1);
  }
  size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0) return std::nullopt;
  return rest.substr(0, colon);
}

}  // namespace

EnvLookup process_env() {
  return [](const char* name) -> std::optional<std::string> {
    // An empty variable counts as unset, as with explicit options ("RANK= prog").
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  };
}

Result<GroupConfig> resolve_group_config(const pg_group_options_t* options,
                                         const EnvLookup& lookup) {
  // Only the fields the caller's struct_size covers; the rest keep their zero defaults.
  pg_group_options_t o{};
  if (options != nullptr) {
    if (options->struct_size < sizeof(uint32_t)) {
      return make_error(PG_ERR_INVALID_ARGUMENT,
                        "options->struct_size is {}; initialise options with "
                        "PG_GROUP_OPTIONS_INIT",
                        options->struct_size);
    }
    std::memcpy(&o, options, std::min<size_t>(options->struct_size, sizeof o));
  }
  Env env(lookup);
  GroupConfig config;
  PG_ASSIGN_OR_RETURN(Placement p, placement(o, env));
  config.rank = p.rank;
  config.size = p.size;
  config.local_rank = p.local_rank;
  config.local_size = p.local_size;
  config.launcher = p.launcher;

  PG_ASSIGN_OR_RETURN(config.master_port, port_from(o, env));
  std::optional<std::string> url = option_text(o.store_url);
  if (auto addr = option_text(o.master_addr)) {
    config.master_addr = *addr;
  } else if (auto env_addr = env.text("MASTER_ADDR")) {
    config.master_addr = *env_addr;
  } else if (auto host = url ? tcp_host(*url) : std::nullopt) {
    config.master_addr = *host;
  } else if (p.single_node) {
    config.master_addr = "127.0.0.1";
  } else {
    return make_error(PG_ERR_CONFIG,
                      "MASTER_ADDR is not set and the job spans several nodes ({} ranks, {} on "
                      "this node): set MASTER_ADDR to rank 0's host, e.g. under Slurm "
                      "MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n1)",
                      p.size, p.local_size);
  }
  config.backend = option_text(o.backend).value_or(env.text("PROCGROUP_BACKEND").value_or(""));
  config.store_token =
      option_text(o.store_token).value_or(env.text("PROCGROUP_STORE_TOKEN").value_or(""));
  if (url) {
    config.store_url = *url;
  } else if (config.size == 1) {
    config.store_url = "memory:";
  } else {
    // Under torchrun's default launch its agent already holds MASTER_PORT: join its store.
    PG_ASSIGN_OR_RETURN(auto agent, agent_store_url(lookup, config.master_addr, config.master_port,
                                                    !config.store_token.empty()));
    bool v6 = config.master_addr.find(':') != std::string::npos;
    config.store_url = agent ? *agent
                       : v6  ? fmt::format("tcp://[{}]:{}", config.master_addr, config.master_port)
                             : fmt::format("tcp://{}:{}", config.master_addr, config.master_port);
  }
  PG_ASSIGN_OR_RETURN(config.timeout, timeout_from(o, env));
  config.timeout_source = o.timeout_ms > 0                    ? "pg_group_options_t.timeout_ms"
                          : env.get("PROCGROUP_TIMEOUT") ? "PROCGROUP_TIMEOUT"
                                                               : "the default; PROCGROUP_TIMEOUT";
  if (o.device_type < 0 || o.device_type >= PG_DEVICE_COUNT_) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "options->device_type {} is not a pg_device_type_t",
                      o.device_type);
  }
  config.device_type = o.device_type == PG_DEVICE_CPU ? -1 : o.device_type;  // 0: no hint
  config.name = option_text(o.name).value_or("world");
  std::string debug = env.text("PROCGROUP_DEBUG").value_or("off");
  std::string debug_lower = debug;
  std::transform(debug_lower.begin(), debug_lower.end(), debug_lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (debug_lower != "off" && debug_lower != "detail")
    return make_error(PG_ERR_CONFIG, "PROCGROUP_DEBUG={} is not one of: off, detail", shown(debug));
  config.debug_detail = debug_lower == "detail";
  // The log reads it once for itself (log.cc); an unknown value is caught here, as above.
  if (auto level = env.text("PROCGROUP_LOG_LEVEL"); level && !parse_log_level(*level))
    return make_error(PG_ERR_CONFIG,
                      "PROCGROUP_LOG_LEVEL={} is not one of: error, warn, info, debug",
                      shown(*level));
  config.trace_dir = env.text("PROCGROUP_TRACE_DIR").value_or("");
  config.timeline_path = env.text("PROCGROUP_TIMELINE").value_or("");
  return config;
}

}  // namespace procgroup::detail
