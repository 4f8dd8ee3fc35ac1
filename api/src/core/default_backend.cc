// Choosing the backend, the default with the other ranks (see default_backend.h).
#include "core/default_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "common/log.h"
#include "core/group.h"
#include "core/hang_report.h"
#include "core/host_services.h"
#include "core/settings_agreement.h"

namespace procgroup::detail {
namespace {

constexpr char kPreferred[] = "ucx";  // the fastest CPU plugin, where it works
constexpr char kFallback[] = "gloo";  // needs nothing but TCP
constexpr char kGpuDefault[] = "nccl";
constexpr char kDefault[] = "(default)";  // the backend setting of a rank that names none
constexpr char kWorks[] = "works";
// The settings: each rank's word on ucx (kWorks or its trouble), rank 0's choice and why.
constexpr char kPreferredKey[] = "default_ucx";
constexpr char kChoiceKey[] = "backend";
constexpr char kReasonKey[] = "reason";

// A setting's value is one line (settings_agreement encodes them line by line).
std::string one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

// Why the plugin `name` cannot serve this CPU group, "" when it can (then *out holds it):
// "is not installed", "failed to load: <why>", "takes no CPU buffers", "failed to start: <why>".
std::string trouble_with(const char* name, const GroupConfig& config, PluginRef* out) {
  const std::vector<std::string> installed = available_backends();
  if (std::find(installed.begin(), installed.end(), name) == installed.end())
    return "is not installed";  // not tried, so no loader warning on a build without it
  auto loaded = load_backend(name, host_services());
  if (!loaded.ok()) return "failed to load: " + loaded.status().message();
  if (((*loaded)->devices & (1u << PG_DEVICE_CPU)) == 0) return "takes no CPU buffers";
  Status started = GroupState::try_alone(*loaded, config);
  if (!started.ok()) return "failed to start: " + started.message();
  *out = std::move(loaded.value());
  return "";
}

// "ucx failed to load on rank 1: <why>", "ucx is not installed on ranks 0-1", or for
// different troubles "ucx does not work on ranks 1-2 (rank 1: failed to start: <why>)".
std::string why_not_preferred(const std::vector<Settings>& all, const std::vector<int>& failing) {
  const std::string first = setting_value(all[failing.front()], kPreferredKey);
  const bool alike = std::all_of(failing.begin(), failing.end(), [&](int r) {
    return setting_value(all[r], kPreferredKey) == first;
  });
  if (!alike) {
    return fmt::format("{} does not work on {} (rank {}: {})", kPreferred, rank_list(failing),
                       failing.front(), first);
  }
  const size_t colon = first.find(": ");
  const std::string what = first.substr(0, colon);
  const std::string detail = colon == std::string::npos ? "" : first.substr(colon);
  return fmt::format("{} {} on {}{}", kPreferred, what, rank_list(failing), detail);
}

// Rank 0's verdict: the shared settings alike, then for the default ucx when every rank
// says it works, else gloo, with the reason.
Result<Settings> decide(const std::vector<Settings>& all) {
  PG_RETURN_IF_ERROR(check_alike(all, {"PROCGROUP_DEBUG", "backend"}));
  if (setting_value(all[0], "backend") != kDefault) return Settings{};
  std::vector<int> failing;
  for (size_t r = 0; r < all.size(); ++r) {
    if (setting_value(all[r], kPreferredKey) != kWorks) failing.push_back(int(r));
  }
  if (failing.empty()) {
    const std::string where =
        all.size() == 1 ? "on the only rank" : fmt::format("on all {} ranks", all.size());
    return Settings{{kChoiceKey, kPreferred}, {kReasonKey, "loads and starts " + where}};
  }
  return Settings{{kChoiceKey, kFallback}, {kReasonKey, why_not_preferred(all, failing)}};
}

}  // namespace

Status GroupState::try_alone(PluginRef plugin, const GroupConfig& config) {
  std::shared_ptr<GroupState> trial(new GroupState(
      "default-backend-trial", Members{0, 1, 0, 1}, config.timeout, std::move(plugin),
      make_memory_store(), false, Diagnostics{}, BackendHints{config.master_addr, PG_DEVICE_CPU}));
  return trial->create_backend_group();  // destroyed with trial
}

Result<BackendCandidate> prepare_backend(const GroupConfig& config) {
  BackendCandidate mine;
  if (!config.backend.empty() || config.device_type == PG_DEVICE_CUDA) {
    const std::string name = config.backend.empty() ? kGpuDefault : config.backend;
    PG_ASSIGN_OR_RETURN(mine.plugin, load_backend(name, host_services()));
    return mine;
  }
  mine.is_default = true;
  mine.trouble = one_line(trouble_with(kPreferred, config, &mine.plugin));
  if (!mine.trouble.empty())
    log(kLogDebug, "core", "default backend: {} {} here", kPreferred, mine.trouble);
  return mine;
}

Result<BackendChoice> agree_on_backend(BackendCandidate mine, const GroupConfig& config,
                                       Store& store, const std::string& prefix) {
  Settings settings{{"PROCGROUP_DEBUG", config.debug_detail ? "detail" : "off"},
                    {"backend", mine.is_default ? kDefault : mine.plugin->name}};
  if (mine.is_default)
    settings.emplace_back(kPreferredKey, mine.trouble.empty() ? kWorks : mine.trouble);
  PG_ASSIGN_OR_RETURN(Settings verdict,
                      agree_on_settings(store, prefix, config.rank, config.size, settings,
                                        Deadline::after(config.timeout), decide));
  if (!mine.is_default) return BackendChoice{std::move(mine.plugin), ""};
  const std::string chosen = setting_value(verdict, kChoiceKey);
  const std::string reason = setting_value(verdict, kReasonKey);
  log(config.rank == 0 ? kLogInfo : kLogDebug, "core", "backend {} (default: {})", chosen, reason);
  if (chosen == kPreferred && mine.plugin) return BackendChoice{std::move(mine.plugin), reason};
  auto loaded = load_backend(chosen, host_services());
  if (!loaded.ok())
    return loaded.status().with_context(
        fmt::format("backend {}, the default ({})", chosen, reason));
  return BackendChoice{std::move(loaded.value()), reason};
}

Status explain_default(Status failure, const BackendChoice& choice) {
  if (failure.ok() || choice.default_reason.empty()) return failure;
  return Status(failure.code(),
                fmt::format("{}; backend '{}' was the default ({}); PROCGROUP_BACKEND={} pins {}",
                            failure.message(), choice.plugin->name, choice.default_reason,
                            kFallback, kFallback));
}

}  // namespace procgroup::detail
