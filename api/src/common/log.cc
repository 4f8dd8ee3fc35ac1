#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <string>

namespace procgroup::detail {
namespace {

constexpr int kRankUnknown = -1;
constexpr int kRankUnread = -2;  // the environment not looked at yet

std::atomic<int> g_log_rank{kRankUnread};

int level_from_env() {
  const char* v = std::getenv("PROCGROUP_LOG_LEVEL");
  if (v == nullptr) return kLogWarn;
  return parse_log_level(v).value_or(kLogWarn);
}

// The launchers' rank variables, in env.cc's order (torchrun, Open MPI, Slurm).
int rank_from_env() {
  for (const char* name : {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"}) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    long rank = std::strtol(v, &end, 10);
    if (*end == '\0' && rank >= 0 && rank < (1L << 30)) return static_cast<int>(rank);
  }
  return kRankUnknown;
}

int log_rank() {
  int rank = g_log_rank.load(std::memory_order_relaxed);
  if (rank != kRankUnread) return rank;
  int expected = kRankUnread;
  g_log_rank.compare_exchange_strong(expected, rank_from_env());
  return g_log_rank.load(std::memory_order_relaxed);
}

const char* level_name(int level) {
  switch (level) {
    case kLogError: return "error";
    case kLogWarn: return "warn";
    case kLogInfo: return "info";
    default: return "debug";
  }
}

// "2026-11-26T09:52:09.123456Z": UTC, so lines of ranks on hosts in other zones compare.
std::string timestamp() {
  using namespace std::chrono;
  const auto now = system_clock::now();
  const std::time_t seconds = system_clock::to_time_t(now);
  const auto micros = duration_cast<microseconds>(now.time_since_epoch()).count() % 1000000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z", utc.tm_year + 1900,
                     utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, micros);
}

}  // namespace

std::optional<int> parse_log_level(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "error") return kLogError;
  if (lower == "warn") return kLogWarn;
  if (lower == "info") return kLogInfo;
  if (lower == "debug") return kLogDebug;
  return std::nullopt;
}

bool log_enabled(int level) {
  static const int threshold = level_from_env();  // read once: the environment is fixed
  return level <= threshold;
}

void set_log_rank(int rank) {
  if (log_rank() != kRankUnknown) return;
  int expected = kRankUnknown;
  g_log_rank.compare_exchange_strong(expected, rank);
}

void log_line(int level, std::string_view component, std::string_view message) {
  const int rank = log_rank();
  const std::string who = rank >= 0 ? fmt::format("procgroup[{}] rank {}", getpid(), rank)
                                    : fmt::format("procgroup[{}]", getpid());
  // One write per line so lines of concurrent threads and ranks do not interleave.
  std::string line =
      fmt::format("{} {} {} {}: {}\n", timestamp(), who, level_name(level), component, message);
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace procgroup::detail
