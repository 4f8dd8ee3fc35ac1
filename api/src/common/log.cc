#include "common/log.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace procgroup::detail {
namespace {

int level_from_env() {
  const char* v = std::getenv("PROCGROUP_LOG_LEVEL");
  if (v == nullptr) return kLogWarn;
  if (std::strcmp(v, "error") == 0) return kLogError;
  if (std::strcmp(v, "info") == 0) return kLogInfo;
  if (std::strcmp(v, "debug") == 0) return kLogDebug;
  return kLogWarn;
}

const char* level_name(int level) {
  switch (level) {
    case kLogError: return "error";
    case kLogWarn: return "warn";
    case kLogInfo: return "info";
    default: return "debug";
  }
}

}  // namespace

bool log_enabled(int level) {
  static const int threshold = level_from_env();  // read once: the environment is fixed
  return level <= threshold;
}

void log_line(int level, std::string_view component, std::string_view message) {
  // One write per line so lines of concurrent threads and ranks do not interleave.
  std::string line =
      fmt::format("procgroup[{}] {} {}: {}\n", getpid(), level_name(level), component, message);
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace procgroup::detail
