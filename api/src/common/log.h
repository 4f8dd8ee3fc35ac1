// The library's log: one line per message on stderr, filtered by PROCGROUP_LOG_LEVEL
// (error, warn [default], info, debug; any case). Levels match procgroup_backend.h's PG_LOG_*.
// A line reads "2026-11-26T09:52:09.123456Z procgroup[4711] rank 3 info core: message": UTC
// time, pid, the rank (from RANK, OMPI_COMM_WORLD_RANK or SLURM_PROCID, else the first
// group created; left out while unknown), level, component.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string_view>

namespace procgroup::detail {

enum LogLevel : int { kLogError = 0, kLogWarn = 1, kLogInfo = 2, kLogDebug = 3 };

// "error", "warn", "info", "debug" in any case; nullopt for anything else. Group creation
// turns an unknown PROCGROUP_LOG_LEVEL into PG_ERR_CONFIG (the log itself then uses warn).
std::optional<int> parse_log_level(std::string_view text);

bool log_enabled(int level);
void log_line(int level, std::string_view component, std::string_view message);
// The rank shown in log lines when the environment names none: the first call wins.
void set_log_rank(int rank);

template <class... Args>
void log(int level, std::string_view component, fmt::format_string<Args...> format,
         Args&&... args) {
  if (log_enabled(level))
    log_line(level, component, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace procgroup::detail
