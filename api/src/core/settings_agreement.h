// Settings every rank of a group must share, compared once when the group is created.
// PROCGROUP_DEBUG=detail adds a fingerprint exchange before every collective: a rank that
// has it while another has not waits for a partner that never comes, and every collective
// times out with no hint why. The backend must be the same plugin everywhere, too. So
// group creation compares them first and fails with PG_ERR_CONFIG naming the setting and
// the ranks. Rank 0's verdict may also settle a choice every rank must make alike (the
// default backend, default_backend.h):
//
//   Settings mine{{"PROCGROUP_DEBUG", "detail"}, {"backend", "gloo"}};
//   auto alike = [](const std::vector<Settings>& all) -> Result<Settings> {
//     PG_RETURN_IF_ERROR(check_alike(all, {"PROCGROUP_DEBUG", "backend"}));
//     return Settings{};
//   };
//   PG_ASSIGN_OR_RETURN(Settings verdict, agree_on_settings(store, "pg/<group>/core/settings/",
//                                                           1, 4, mine, deadline, alike));
//
// Through the store: every rank publishes its settings, rank 0 judges them all and
// publishes the verdict, which every rank reads (O(size) store requests in all).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"
#include "store/store.h"

namespace procgroup::detail {

using Settings = std::vector<std::pair<std::string, std::string>>;  // name, value

// Rank 0's judgement of every rank's settings (all[r] is rank r's): the value every rank
// returns, or the failure every rank fails with.
using SettingsVerdict = std::function<Result<Settings>(const std::vector<Settings>& all)>;

// Every rank's settings to rank 0, its verdict back to every rank. A rank that never comes
// fails the others with the ranks that never joined once the deadline passes.
Result<Settings> agree_on_settings(Store& store, const std::string& prefix, int rank, int size,
                                   const Settings& mine, Deadline deadline,
                                   const SettingsVerdict& verdict);

// PG_ERR_CONFIG naming each of `names` whose value differs between ranks ("PROCGROUP_DEBUG
// differs between ranks: rank 0 has 'off', rank 1 has 'detail'"); OK when all are alike.
Status check_alike(const std::vector<Settings>& all, const std::vector<std::string>& names);

// The value of `name` in settings, "(unset)" when it has none.
std::string setting_value(const Settings& settings, std::string_view name);

}  // namespace procgroup::detail
