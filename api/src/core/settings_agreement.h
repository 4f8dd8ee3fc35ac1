// Settings every rank of a group must share, compared once when the group is created.
// PROCGROUP_DEBUG=detail adds a fingerprint exchange before every collective: a rank that
// has it while another has not waits for a partner that never comes, and every collective
// times out with no hint why. The backend must be the same plugin everywhere, too. So
// group creation compares them first and fails with PG_ERR_CONFIG naming the setting and
// the ranks:
//
//   Settings mine{{"PROCGROUP_DEBUG", "detail"}, {"backend", "gloo"}};
//   PG_RETURN_IF_ERROR(check_settings_agree(store, "pg/<group>/core/settings/", 1, 4, mine,
//                                           Deadline::after(timeout)));
//
// Through the store: every rank publishes its settings, rank 0 compares them all and
// publishes the verdict, which every rank reads (O(size) store requests in all).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"
#include "store/store.h"

namespace procgroup::detail {

using Settings = std::vector<std::pair<std::string, std::string>>;  // name, value

Status check_settings_agree(Store& store, const std::string& prefix, int rank, int size,
                            const Settings& mine, Deadline deadline);

}  // namespace procgroup::detail
