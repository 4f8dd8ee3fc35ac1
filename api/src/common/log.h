// The library's log: one line per message on stderr, filtered by PROCGROUP_LOG_LEVEL
// (error, warn [default], info, debug). Levels match procgroup_backend.h's PG_LOG_*.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace procgroup::detail {

enum LogLevel : int { kLogError = 0, kLogWarn = 1, kLogInfo = 2, kLogDebug = 3 };

bool log_enabled(int level);
void log_line(int level, std::string_view component, std::string_view message);

template <class... Args>
void log(int level, std::string_view component, fmt::format_string<Args...> format,
         Args&&... args) {
  if (log_enabled(level))
    log_line(level, component, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace procgroup::detail
