// A work: the completion record of one operation, shared between the caller's handle and
// whoever finishes it (a rank's worker thread, or the peer thread that matches a recv).
// It is shared because the caller may release its handle while the operation is still
// pending; the last holder frees it. It holds no pointer into the group, so a
// completed work can be tested and released after the group is gone.
#pragma once

#include <memory>
#include <string>

#include "procgroup/procgroup_backend_kit.hpp"

namespace procgroup::loopback {

using kit::Clock;
using kit::deadline_after;  // now + ms, saturated at kNever
using kit::kNever;
using kit::Status;

// complete(status, message) (only the first call counts: abort and a late success may
// race) and test() are kit::Completion's.
class Work : public kit::Completion {
 public:
  // timeout_ms < 0 waits for completion, which every operation reaches by its own deadline.
  pg_status_t wait(int64_t timeout_ms, std::string* message) const {
    return wait_until(timeout_ms < 0 ? kNever : deadline_after(timeout_ms), message);
  }
};

// An owning reference to a Work, for the caller's handle, the worker queue and p2p tables.
using WorkRef = std::shared_ptr<Work>;

}  // namespace procgroup::loopback
