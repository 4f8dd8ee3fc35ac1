// Comparing the settings every rank must share (see settings_agreement.h).
#include "core/settings_agreement.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <thread>

#include "core/hang_report.h"

namespace procgroup::detail {
namespace {

constexpr Millis kReadGrace{2000};
// How long ranks wait for rank 0's verdict past their deadline, and rank 0 for them to read
// a timeout: rank 0 reaches the same deadline a moment after them.
constexpr Millis kVerdictSlack{500};
// How long rank 0 may look for the other missing ranks once one timed out, so that creation
// still ends soon after its timeout at any world size.
constexpr Millis kProbeBudget{250};

Bytes encode(const Settings& settings) {
  std::string text;
  for (const auto& [name, value] : settings) {
    text.append(name).append("=").append(value).append("\n");
  }
  return Bytes(text.begin(), text.end());
}

Settings decode(const Bytes& bytes) {
  Settings settings;
  const std::string text(bytes.begin(), bytes.end());
  size_t start = 0;
  for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    const std::string line = text.substr(start, end - start);
    const size_t eq = line.find('=');
    if (eq != std::string::npos) settings.emplace_back(line.substr(0, eq), line.substr(eq + 1));
  }
  return settings;
}

// Rank 0's verdict: the status code's byte, then the settings every rank returns (PG_OK) or
// the message every rank fails with (a difference, or rank 0's timeout: the ranks that came
// then fail at once with rank 0's words, not when its store goes away).
Bytes encode_verdict(const Result<Settings>& verdict) {
  const Status& status = verdict.status();
  Bytes bytes{static_cast<uint8_t>(status.code())};
  const Bytes text = verdict.ok() ? encode(verdict.value())
                                  : Bytes(status.message().begin(), status.message().end());
  bytes.insert(bytes.end(), text.begin(), text.end());
  return bytes;
}

Result<Settings> decode_verdict(const Bytes& bytes) {
  if (bytes.empty()) return Settings{};
  if (bytes[0] == PG_OK) return decode(Bytes(bytes.begin() + 1, bytes.end()));
  return Status(static_cast<pg_status_t>(bytes[0]), std::string(bytes.begin() + 1, bytes.end()));
}

// Publishes rank 0's verdict and, when it is a failure, keeps rank 0 (which may host the
// store) up until every rank that came has read it, or briefly.
Result<Settings> publish_verdict(Store& store, const std::string& prefix,
                                 const Result<Settings>& verdict, int readers, Millis grace) {
  PG_RETURN_IF_ERROR(store.set(prefix + "verdict", encode_verdict(verdict)));
  if (verdict.ok()) return verdict;
  const Deadline read_by = Deadline::after(grace);
  for (;;) {
    auto read = store.add(prefix + "read", 0);
    if (!read.ok() || *read >= readers || read_by.expired()) break;
    std::this_thread::sleep_for(Millis(5));
  }
  return verdict;
}

// "PROCGROUP_DEBUG differs between ranks: rank 0 has 'off', rank 1 has 'detail'", or ""
// when every rank has rank 0's values for names.
std::string differences(const std::vector<Settings>& all, const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) {
    const std::string ours = setting_value(all[0], name);
    std::map<std::string, std::vector<int>> ranks_by_value;
    for (size_t r = 0; r < all.size(); ++r)
      ranks_by_value[setting_value(all[r], name)].push_back(int(r));
    if (ranks_by_value.size() == 1) continue;
    std::string who;
    auto add = [&](const std::string& value) {
      const std::vector<int>& ranks = ranks_by_value[value];
      who += fmt::format("{}{} {} '{}'", who.empty() ? "" : ", ",
                         ranks.size() == 1 ? "rank" : "ranks", format_ranks(ranks), value);
    };
    add(ours);  // rank 0's first
    for (const auto& [value, ranks] : ranks_by_value) {
      if (value != ours) add(value);
    }
    text += fmt::format("{}{} differs between ranks: {}", text.empty() ? "" : "; ", name, who);
  }
  return text;
}

// The ranks from `first` on that never published their settings, for rank 0's timeout
// message ("ranks 1-99999 (99999) never joined"). The "joined" count answers the usual case
// (none of the rest came either) in one request; otherwise each remaining rank is looked up,
// for kProbeBudget at most.
Status never_joined(Store& store, const std::string& prefix, int first, int size,
                    const Status& waited) {
  std::vector<int> missing{first};
  int unchecked = size;  // ranks from here on were not looked up
  auto joined = store.add(prefix + "joined", 0);
  if (joined.ok() && *joined == first - 1) {
    for (int r = first + 1; r < size; ++r) missing.push_back(r);
  } else {
    const Deadline budget = Deadline::after(kProbeBudget);
    for (int r = first + 1; r < size && unchecked == size; ++r) {
      const std::vector<std::string> key{prefix + std::to_string(r)};
      auto present = budget.expired() ? Result<bool>(waited) : store.check(key);
      if (!present.ok()) {
        unchecked = r;
      } else if (!*present) {
        missing.push_back(r);
      }
    }
  }
  std::string text = fmt::format("{} never joined", rank_list(missing));
  if (unchecked < size) text += fmt::format(" (ranks {}-{} not looked for)", unchecked, size - 1);
  return Status(waited.code(), fmt::format("{}: {}", text, waited.message()));
}

}  // namespace

std::string setting_value(const Settings& settings, std::string_view name) {
  for (const auto& [n, v] : settings) {
    if (n == name) return v;
  }
  return "(unset)";
}

Status check_alike(const std::vector<Settings>& all, const std::vector<std::string>& names) {
  const std::string diff = all.empty() ? std::string() : differences(all, names);
  if (diff.empty()) return ok_status();
  return make_error(PG_ERR_CONFIG, "{} (set them alike on every rank)", diff);
}

Result<Settings> agree_on_settings(Store& store, const std::string& prefix, int rank, int size,
                                   const Settings& mine, Deadline deadline,
                                   const SettingsVerdict& verdict) {
  if (size <= 1) return verdict({mine});
  const std::string verdict_key = prefix + "verdict";
  if (rank != 0) {
    PG_RETURN_IF_ERROR(store.set(prefix + std::to_string(rank), encode(mine)));
    (void)store.add(prefix + "joined", 1);  // only counted, for rank 0's timeout message
    // A little past the deadline: rank 0 publishes its own timeout just after it.
    auto published = store.get(verdict_key, deadline.remaining() + kVerdictSlack);
    if (!published.ok())
      return published.status().with_context("waiting for rank 0 to compare the ranks' settings");
    Result<Settings> decided = decode_verdict(*published);
    if (decided.ok()) return decided;
    (void)store.add(prefix + "read", 1);  // rank 0 may stop hosting the store now
    if (decided.status().code() == PG_ERR_CONFIG) return decided;
    return decided.status().with_context("rank 0 gave up waiting for the others");
  }
  std::vector<Settings> all{mine};
  for (int r = 1; r < size; ++r) {
    auto theirs = store.get(prefix + std::to_string(r), deadline.remaining());
    if (theirs.ok()) {
      all.push_back(decode(*theirs));
      continue;
    }
    Status failure =
        theirs.status().code() == PG_ERR_TIMEOUT
            ? never_joined(store, prefix, r, size, theirs.status())
            : theirs.status().with_context(fmt::format("waiting for rank {}'s settings", r));
    auto came = store.add(prefix + "joined", 0);  // the ranks waiting for a verdict
    Result<Settings> published =
        publish_verdict(store, prefix, failure, came.ok() ? int(*came) : 0, kVerdictSlack);
    (void)published;
    return failure;
  }
  Result<Settings> decided = verdict(all);
  if (decided.ok()) return publish_verdict(store, prefix, decided, 0, Millis(0));
  // Rank 0 may host the store: keep it up until every rank read why (or briefly).
  return publish_verdict(store, prefix, decided, size - 1,
                         std::min(kReadGrace, deadline.remaining()));
}

}  // namespace procgroup::detail
