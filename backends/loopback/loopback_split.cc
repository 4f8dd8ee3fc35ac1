// group_split: the children of a split are made from the parent's shared state, the way
// ncclCommSplit derives communicators from its parent, with no store involved. Every rank
// of the parent posts its request in the split's round (a rank with PG_SPLIT_NO_COLOR too)
// and waits for all; every rank then checks all requests the same way, so a mistake fails
// everywhere alike; the first member of a color to get there creates the child's shared
// state, already holding every member, and each member starts its own handle on it.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "loopback_group.h"

namespace procgroup::loopback {
namespace {

std::string who(size_t rank, const SplitRequest& r) {
  return "parent rank " + std::to_string(rank) + " (color " + std::to_string(r.color) + ", key " +
         std::to_string(r.key) + ")";
}

SplitRequest request_of(int32_t color, int32_t key, const pg_backend_group_config_t* config) {
  SplitRequest r;
  r.color = color;
  r.key = key;
  r.has_config = config != nullptr;
  if (color != PG_SPLIT_NO_COLOR && color < 0) {
    r.problem = "color " + std::to_string(color) + " is negative";
  } else if (config != nullptr) {
    r.problem = kit::check_config(config, "group_split").message;  // "" when fine
    if (r.problem.empty()) {
      r.rank = config->rank;
      r.size = config->size;
      r.group_id = config->group_id;
    }
  }
  return r;
}

// Empty when every rank's request is well formed and each member's child rank and size
// are its place in (key, parent rank) order among its color; else a message naming the
// first rank that is not. Every rank computes the same answer.
std::string check_split(std::span<const SplitRequest> all) {
  std::map<int32_t, std::vector<std::pair<int32_t, size_t>>> colors;  // (key, parent rank)
  for (size_t p = 0; p < all.size(); ++p) {
    const SplitRequest& r = all[p];
    if (!r.problem.empty()) return who(p, r) + ": " + r.problem;
    const bool member = r.color != PG_SPLIT_NO_COLOR;
    if (member != r.has_config) {
      return who(p, r) + (member ? " was given no config" : " was given a config for no group");
    }
    if (member) colors[r.color].emplace_back(r.key, p);
  }
  for (auto& [color, members] : colors) {
    std::sort(members.begin(), members.end());
    const std::string& id = all[members.front().second].group_id;
    for (size_t i = 0; i < members.size(); ++i) {
      const SplitRequest& r = all[members[i].second];
      if (r.rank != static_cast<int32_t>(i) || r.size != static_cast<int32_t>(members.size())) {
        return who(members[i].second, r) + " was given child rank " + std::to_string(r.rank) +
               " of " + std::to_string(r.size) + ", but (key, parent rank) order makes it " +
               std::to_string(i) + " of " + std::to_string(members.size());
      }
      if (r.group_id != id) {
        return who(members[i].second, r) + " was given group id '" + r.group_id + "', but '" + id +
               "' for another member of its color";
      }
    }
  }
  return "";
}

}  // namespace

Status RankGroup::split(int32_t color, int32_t key, const pg_backend_group_config_t* config,
                        std::unique_ptr<RankGroup>* out) {
  const SplitRequest mine = request_of(color, key, config);
  SharedGroup& g = *shared_;
  const std::string where = "loopback group '" + g.group_id + "' rank " + std::to_string(rank_);
  std::shared_ptr<SharedGroup> child;
  std::string mistake;
  {
    std::unique_lock lock(g.mu);
    if (g.failed) return g.failure_for(0);
    const uint64_t k = ++g.slots[rank_].splits;
    SplitRound& round = g.splits.try_emplace(k, g.size).first->second;
    round.requests[rank_] = mine;
    g.cv.notify_all();
    auto all_here = [&] {
      return g.failed || std::ranges::all_of(round.requests, [](auto& r) { return r.has_value(); });
    };
    const bool arrived = kit::wait_until(g.cv, lock, deadline_after(timeout_ms_), all_here);
    if (!arrived) {
      // The parent's ranks are out of step now, so the parent fails, as for a collective.
      std::string message = "group_split #" + std::to_string(k) + " timed out after " +
                            std::to_string(timeout_ms_) + " ms on " + where +
                            "; not heard from rank(s) " +
                            rank_list(g.size, [&](int r) { return !round.requests[r]; });
      g.fail_locked(PG_ERR_TIMEOUT, message, 0);
      return {PG_ERR_TIMEOUT, message};
    }
    if (g.failed) return g.failure_for(0);
    std::vector<SplitRequest> all;
    for (const auto& r : round.requests) all.push_back(*r);
    mistake = check_split(all);
    if (mistake.empty() && mine.has_config) {
      std::shared_ptr<SharedGroup>& made = round.children[color];
      if (made == nullptr) {
        // Instance 0 is never in the registry: nobody looks a split child up by the store.
        made = std::make_shared<SharedGroup>(mine.group_id, mine.size, 0);
        for (Slot& slot : made->slots) slot.joined = true;
        made->alive = mine.size;
      }
      child = made;
    }
    if (++round.finished == g.size) g.splits.erase(k);
  }
  if (!mistake.empty()) return {PG_ERR_INVALID_ARGUMENT, where + ": group_split: " + mistake};
  if (child == nullptr) return {};  // PG_SPLIT_NO_COLOR: no group, *out stays NULL
  return launch(std::move(child), mine.rank, config->timeout_ms, host_, out);
}

}  // namespace procgroup::loopback
