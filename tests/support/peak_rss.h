// This process's peak resident set (VmHWM of /proc/self/status), in KiB; -1 if unknown.
// For tests that check memory stays proportional to what a group really uses.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace pgtest {

inline int64_t peak_rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

}  // namespace pgtest
