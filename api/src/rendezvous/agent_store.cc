#include "rendezvous/agent_store.h"

#include <charconv>

namespace procgroup::detail {

Result<std::optional<std::string>> agent_store_url(const EnvLookup& env,
                                                   const std::string& master_addr, int master_port,
                                                   bool has_token) {
  // torch compares with the exact string "True" (rendezvous.py); so do we, so that procgroup
  // and torch code in one job always agree on whose store this is.
  if (env("TORCHELASTIC_USE_AGENT_STORE") != std::optional<std::string>("True")) {
    return std::optional<std::string>();
  }
  if (has_token) {
    // Refused rather than ignored: a user who set a token expects an authenticated store,
    // and torch's TCPStore authenticates nobody.
    return make_error(PG_ERR_CONFIG,
                      "PROCGROUP_STORE_TOKEN is set, but under torchrun's default launch "
                      "procgroup joins torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE=True), "
                      "a c10d TCPStore that cannot check a token: unset PROCGROUP_STORE_TOKEN, "
                      "or launch with torchrun --standalone or pgrun, where rank 0 hosts "
                      "procgroup's own store");
  }
  std::string attempt = env("TORCHELASTIC_RESTART_COUNT").value_or("0");
  int count = 0;
  const char* end = attempt.data() + attempt.size();
  auto [ptr, ec] = std::from_chars(attempt.data(), end, count);
  if (ec != std::errc() || ptr != end || count < 0) {
    return make_error(PG_ERR_CONFIG,
                      "TORCHELASTIC_RESTART_COUNT='{}' is not a count of restarts (set by "
                      "torchrun)",
                      attempt);
  }
  bool v6 = master_addr.find(':') != std::string::npos;
  std::string host = v6 ? fmt::format("[{}]", master_addr) : master_addr;
  return std::optional<std::string>(
      fmt::format("c10d://{}:{}/procgroup/attempt_{}/?agent", host, master_port, count));
}

}  // namespace procgroup::detail
