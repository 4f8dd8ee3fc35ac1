#include "core/hang_report.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <thread>

#include "common/log.h"
#include "store/socket_util.h"

namespace procgroup::detail {
namespace {

constexpr Millis kReportStoreTimeout{2000};
constexpr Millis kGatherWindow{1000};

std::string key_for(const HangContext& c, int rank) {
  return fmt::format("pg/{}/core/hang/{}", c.group_id, rank);
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
  for (auto& [label, ranks] : waiting)
    parts.push_back(fmt::format("rank{} {} {} in {}", ranks.size() > 1 ? "s" : "",
                                format_ranks(ranks), ranks.size() > 1 ? "are" : "is", label));
  if (!idle.empty())
    parts.push_back(fmt::format("rank{} {} not inside a collective", idle.size() > 1 ? "s" : "",
                                format_ranks(idle)));
  if (!silent.empty()) {
    std::string joined = oldest == UINT64_MAX ? "" : fmt::format("; not joined op #{}", oldest);
    parts.push_back(fmt::format("rank{} {} did not report (busy outside procgroup, stuck or "
                                "gone{})",
                                silent.size() > 1 ? "s" : "", format_ranks(silent), joined));
  }
  std::string text = fmt::format("group '{}' hang summary: ", c.group_id);
  for (size_t i = 0; i < parts.size(); ++i) text += (i ? "; " : "") + parts[i];
  return text;
}

// This rank's view for its error message: every other rank not in the same operation.
std::string describe_behind(const HangContext& c, const std::map<int, std::string>& states) {
  const std::string& mine = states.at(c.rank);
  std::vector<int> silent;
  std::map<std::string, std::vector<int>> elsewhere;  // where -> ranks
  for (int r = 0; r < c.size; ++r) {
    if (r == c.rank) continue;
    auto it = states.find(r);
    if (it == states.end()) {
      silent.push_back(r);
    } else if (it->second != mine) {
      const std::string& s = it->second;
      elsewhere[s.rfind("in ", 0) == 0 ? "in " + s.substr(s.find(' ', 3) + 1)
                                       : "not inside a collective"]
          .push_back(r);
    }
  }
  std::vector<std::string> parts;
  if (!silent.empty())
    parts.push_back(fmt::format("not heard from: rank{} {} (stuck, stopped or gone)",
                                silent.size() > 1 ? "s" : "", format_ranks(silent)));
  for (auto& [where, ranks] : elsewhere)
    parts.push_back(
        fmt::format("rank{} {} {}", ranks.size() > 1 ? "s" : "", format_ranks(ranks), where));
  std::string text;
  for (size_t i = 0; i < parts.size(); ++i) text += (i ? "; " : "") + parts[i];
  return text;
}

// True when every rank reported being inside the same operation number, but not every
// rank with the same arguments: they did not hang, they disagree (a backend that keeps
// mismatched messages apart times out on such a call instead of corrupting memory).
bool same_op_different_calls(const HangContext& c, const std::map<int, std::string>& states) {
  if (static_cast<int>(states.size()) != c.size) return false;
  auto seq_of = [](const std::string& s) {
    return s.rfind("in ", 0) == 0 ? s.substr(3, s.find(' ', 3) - 3) : std::string();
  };
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
  for (size_t i = 0; i < r.size();) {
    size_t j = i;
    while (j + 1 < r.size() && r[j + 1] == r[j] + 1) ++j;
    if (!text.empty()) text += ", ";
    text += j == i ? fmt::format("{}", r[i]) : fmt::format("{}-{}", r[i], r[j]);
    i = j + 1;
  }
  return text;
}

HangFindings report_hang(const HangContext& c, const FlightRecorder& recorder) {
  std::string trace = fmt::format("group '{}' rank {} of {}: the last operations:\n{}",
                                  c.group_id, c.rank, c.size, recorder.format());
  log_line(kLogError, "hang", trace);
  write_trace_file(c, trace);
  if (c.size <= 1 || (!c.user_store && c.store.url.rfind("memory:", 0) == 0)) return {};

  // A plain client (never rank 0's server) with a short timeout; the caller's store as is.
  Result<std::shared_ptr<Store>> store = c.user_store;
  if (!c.user_store) {
    StoreConfig config = c.store;
    config.rank = 1;
    config.timeout = kReportStoreTimeout;
    store = open_store(config);
  }
  if (!store.ok()) {
    log(kLogWarn, "hang", "no summary: store unreachable: {}", store.status().to_string());
    return {"", store_host_silent(c)};
  }
  std::string mine = encode_state(recorder.progress());
  Status published = (*store)->set(key_for(c, c.rank), Bytes(mine.begin(), mine.end()));
  if (!published.ok()) {
    log(kLogWarn, "hang", "no summary: {}", published.to_string());
    return {};
  }

  // Give the other ranks' reports a moment to arrive, then read what is there.
  std::map<int, std::string> states;
  const Deadline window = Deadline::after(kGatherWindow);
  do {
    for (int r = 0; r < c.size; ++r) {
      if (states.count(r)) continue;
      std::vector<std::string> key{key_for(c, r)};
      auto present = (*store)->check(key);
      if (!present.ok()) {  // rank 0 answered, then left: nothing to say about the others
        log(kLogWarn, "hang", "no summary: {}", present.status().to_string());
        return {};
      }
      if (*present) {
        auto value = (*store)->get(key[0], Millis(100));
        if (value.ok()) states[r] = std::string(value->begin(), value->end());
      }
    }
    if (static_cast<int>(states.size()) == c.size) break;
    std::this_thread::sleep_for(Millis(50));
  } while (!window.expired());
  HangFindings findings{"", states.count(c.rank) ? describe_behind(c, states) : "",
                        same_op_different_calls(c, states)};
  if (states.empty() || states.begin()->first != c.rank) return findings;  // a lower rank prints
  findings.summary = summarize(c, states);
  log_line(kLogError, "hang", findings.summary);
  return findings;
}

}  // namespace procgroup::detail
