#include "core/hang_report.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <map>
#include <thread>

#include "common/log.h"
#include "store/socket_util.h"

namespace procgroup::detail {
namespace {

constexpr Millis kReportStoreTimeout{2000};
constexpr Millis kGatherWindow{1000};
// Messages name at most this many rank ranges, or places where ranks are.
constexpr size_t kShownRanges = 8;
constexpr size_t kShownPlaces = 8;

// Reports go to numbered slots ("<rank> <state>"), counted by one key: a reader reads as
// many keys as there are reports, never one per rank, so a world of 100,000 ranks where a
// few report costs a few store calls, and the reading stops when the window closes.
std::string count_key(const HangContext& c) {
  return fmt::format("pg/{}/core/hang/count", c.group_id);
}
std::string slot_key(const HangContext& c, int64_t slot) {
  return fmt::format("pg/{}/core/hang/{}", c.group_id, slot);
}

// The sequence number in a state "in <seq> <label>"; "" for "idle ...".
std::string seq_of(const std::string& state) {
  return state.rfind("in ", 0) == 0 ? state.substr(3, state.find(' ', 3) - 3) : std::string();
}

std::string join(const std::vector<std::string>& parts) {
  std::string text;
  for (size_t i = 0; i < parts.size(); ++i) text += (i ? "; " : "") + parts[i];
  return text;
}

// Written to a fresh temporary name (mkostemp: O_EXCL, so never through a link) and renamed
// over the report's name: rename replaces a planted symlink or a stale report and never
// writes to what a link points at.
void write_trace_file(const HangContext& c, const std::string& text) {
  if (c.trace_dir.empty()) return;
  mkdir(c.trace_dir.c_str(), 0755);  // best effort: it may exist already
  std::string safe_id = c.group_id;
  for (char& ch : safe_id)
    if (ch == '/') ch = '_';
  std::string path = fmt::format("{}/procgroup-{}-rank{}.trace", c.trace_dir, safe_id, c.rank);
  std::string tmp = fmt::format("{}/.procgroup-trace.XXXXXX", c.trace_dir);
  UniqueFd fd(::mkostemp(tmp.data(), O_CLOEXEC));
  if (!fd.valid()) {
    log(kLogWarn, "hang", "could not write {}: cannot create a file in {}: {}", path, c.trace_dir,
        errno_text(errno));
    return;
  }
  fchmod(fd.get(), 0644);  // mkostemp makes it 0600; the report is for whoever debugs the job
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      log(kLogWarn, "hang", "could not write {}: {}", tmp, errno_text(errno));
      ::unlink(tmp.c_str());
      return;
    }
    done += static_cast<size_t>(n);
  }
  fd.reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    log(kLogWarn, "hang", "could not write {}: the name exists and cannot be replaced ({})", path,
        errno_text(errno));
    ::unlink(tmp.c_str());
  }
}

// The state a rank publishes: "in <seq> <label>" or "idle <last completed seq>".
std::string encode_state(const FlightRecorder::Progress& p) {
  if (p.waiting_in) return fmt::format("in {} {}", p.waiting_in->seq, p.waiting_in->to_string());
  return fmt::format("idle {}", p.last_completed_seq);
}

std::string summarize(const HangContext& c, const std::map<int, std::string>& states) {
  std::map<std::string, std::vector<int>> waiting;  // label -> ranks
  std::vector<int> idle, silent;
  uint64_t oldest = UINT64_MAX;
  std::string idle_text;
  for (int r = 0; r < c.size; ++r) {
    auto it = states.find(r);
    if (it == states.end()) {
      silent.push_back(r);
    } else if (it->second.rfind("in ", 0) == 0) {
      size_t space = it->second.find(' ', 3);
      oldest = std::min<uint64_t>(oldest, std::stoull(it->second.substr(3, space - 3)));
      waiting[it->second.substr(space + 1)].push_back(r);
    } else {
      idle.push_back(r);
    }
  }
  std::vector<std::string> parts;
  for (auto& [label, ranks] : waiting) {
    if (parts.size() == kShownPlaces) {
      parts.push_back(
          fmt::format("other ranks in {} more operations", waiting.size() - kShownPlaces));
      break;
    }
    parts.push_back(
        fmt::format("{} {} in {}", rank_list(ranks), ranks.size() > 1 ? "are" : "is", label));
  }
  if (!idle.empty()) parts.push_back(fmt::format("{} not inside a collective", rank_list(idle)));
  if (!silent.empty()) {
    std::string joined = oldest == UINT64_MAX ? "" : fmt::format("; not joined op #{}", oldest);
    parts.push_back(fmt::format("{} did not report (busy outside procgroup, stuck or gone{})",
                                rank_list(silent), joined));
  }
  return fmt::format("group '{}' hang summary: {}", c.group_id, join(parts));
}

// This rank's view for its error message: every other rank not in the same operation.
std::string describe_behind(const HangContext& c, const std::map<int, std::string>& states) {
  const std::string& mine = states.at(c.rank);
  std::vector<int> silent;
  std::map<std::string, std::vector<int>> elsewhere;  // where -> ranks
  bool same_seq_other_call = false;  // the evidence for "ranks passed different arguments"
  for (int r = 0; r < c.size; ++r) {
    if (r == c.rank) continue;
    auto it = states.find(r);
    if (it == states.end()) {
      silent.push_back(r);
    } else if (it->second != mine) {
      const std::string& s = it->second;
      same_seq_other_call =
          same_seq_other_call || (!seq_of(s).empty() && seq_of(s) == seq_of(mine));
      elsewhere[s.rfind("in ", 0) == 0 ? "in " + s.substr(s.find(' ', 3) + 1)
                                       : "not inside a collective"]
          .push_back(r);
    }
  }
  std::vector<std::string> parts;
  if (!silent.empty())
    parts.push_back(fmt::format("not heard from: {} (stuck, stopped or gone)", rank_list(silent)));
  size_t shown = 0;
  for (auto& [where, ranks] : elsewhere) {
    if (shown++ == kShownPlaces) {
      parts.push_back(
          fmt::format("other ranks in {} more places", elsewhere.size() - kShownPlaces));
      break;
    }
    parts.push_back(fmt::format("{} {}", rank_list(ranks), where));
  }
  // Only when some rank is at this operation number with other arguments: a rank that did
  // not arrive is no sign of different counts.
  if (same_seq_other_call)
    parts.emplace_back(
        "ranks that pass different counts, dtypes, roots or reduce ops to the same "
        "operation never match; PROCGROUP_DEBUG=detail names the rank that differs");
  return join(parts);
}

// True when every rank reported being inside the same operation number, but not every
// rank with the same arguments: they did not hang, they disagree (a backend that keeps
// mismatched messages apart times out on such a call instead of corrupting memory).
bool same_op_different_calls(const HangContext& c, const std::map<int, std::string>& states) {
  if (static_cast<int>(states.size()) != c.size) return false;
  const std::string& first = states.begin()->second;
  if (seq_of(first).empty()) return false;
  bool differ = false;
  for (const auto& [rank, state] : states) {
    if (seq_of(state) != seq_of(first)) return false;
    differ = differ || state != first;
  }
  return differ;
}

// When the store cannot even be reached, nothing is known of the others, except that
// rank 0, which hosts a TCP store, did not answer.
std::string store_host_silent(const HangContext& c) {
  if (c.store.url.rfind("tcp://", 0) != 0 || c.rank == 0) return "";
  return "not heard from: rank 0, which hosts the store (stuck, stopped or gone)";
}

}  // namespace

std::string format_ranks(const std::vector<int>& r) {
  std::string text;
  size_t ranges = 0, left = r.size();
  for (size_t i = 0; i < r.size();) {
    size_t j = i;
    while (j + 1 < r.size() && r[j + 1] == r[j] + 1) ++j;
    if (ranges++ == kShownRanges) return fmt::format("{} and {} more", text, left);
    if (!text.empty()) text += ", ";
    text += j == i ? fmt::format("{}", r[i]) : fmt::format("{}-{}", r[i], r[j]);
    left -= j - i + 1;
    i = j + 1;
  }
  return text;
}

std::string rank_list(const std::vector<int>& r) {
  if (r.size() == 1) return fmt::format("rank {}", r[0]);
  if (r.size() == 2) return fmt::format("ranks {}", format_ranks(r));
  return fmt::format("ranks {} ({})", format_ranks(r), r.size());
}

namespace {

// A plain client (never rank 0's server) with a short timeout; the caller's store as is.
Result<std::shared_ptr<Store>> report_store(const HangContext& c) {
  if (c.user_store) return c.user_store;
  StoreConfig config = c.store;
  config.rank = 1;
  config.timeout = kReportStoreTimeout;
  return open_store(config);
}

// Puts "<rank> <state>" into the next numbered slot.
Status publish(Store& store, const HangContext& c, const std::string& state) {
  const std::string report = fmt::format("{} {}", c.rank, state);
  auto slot = store.add(count_key(c), 1);
  return slot.ok() ? store.set(slot_key(c, *slot), Bytes(report.begin(), report.end()))
                   : slot.status();
}

bool has_store(const HangContext& c) {
  return c.size > 1 && (c.user_store || c.store.url.rfind("memory:", 0) != 0);
}

}  // namespace

void publish_hang_state(const HangContext& c, const FlightRecorder& recorder) {
  if (!has_store(c)) return;
  Result<std::shared_ptr<Store>> store = report_store(c);
  if (!store.ok()) return;
  const Status published = publish(**store, c, encode_state(recorder.progress()));
  if (!published.ok()) log(kLogDebug, "hang", "state not published: {}", published.to_string());
}

HangFindings report_hang(const HangContext& c, const FlightRecorder& recorder) {
  std::string trace = fmt::format("group '{}' rank {} of {}: the last operations:\n{}", c.group_id,
                                  c.rank, c.size, recorder.format());
  log_line(kLogError, "hang", trace);
  write_trace_file(c, trace);
  if (!has_store(c)) return {};

  Result<std::shared_ptr<Store>> store = report_store(c);
  if (!store.ok()) {
    log(kLogWarn, "hang", "no summary: store unreachable: {}", store.status().to_string());
    return {"", store_host_silent(c)};
  }
  const std::string mine = encode_state(recorder.progress());
  if (Status published = publish(**store, c, mine); !published.ok()) {
    log(kLogWarn, "hang", "no summary: {}", published.to_string());
    return {};
  }

  // Give the other ranks' reports a moment to arrive, then read what is there.
  std::map<int, std::string> states{{c.rank, mine}};
  const Deadline window = Deadline::after(kGatherWindow);
  int64_t read = 0;  // slots read so far
  do {
    auto reports = (*store)->add(count_key(c), 0);
    if (!reports.ok()) {  // rank 0 answered, then left: nothing to say about the others
      log(kLogWarn, "hang", "no summary: {}", reports.status().to_string());
      return {};
    }
    // A slot counted but not yet written: its writer is between add and set; next round.
    while (read < *reports && !window.expired()) {
      auto value = (*store)->get(slot_key(c, read + 1), Millis(100));
      if (!value.ok()) break;
      ++read;
      const std::string text(value->begin(), value->end());
      const char* const text_end = text.data() + text.size();
      int rank = -1;
      auto [space, ec] = std::from_chars(text.data(), text_end, rank);
      if (ec == std::errc() && rank >= 0 && rank < c.size && space < text_end)
        states[rank] = std::string(space + 1, text_end);
    }
    if (static_cast<int>(states.size()) == c.size) break;
    std::this_thread::sleep_for(Millis(50));
  } while (!window.expired());
  HangFindings findings{"", describe_behind(c, states), same_op_different_calls(c, states)};
  if (states.empty() || states.begin()->first != c.rank) return findings;  // a lower rank prints
  findings.summary = summarize(c, states);
  log_line(kLogError, "hang", findings.summary);
  return findings;
}

}  // namespace procgroup::detail
