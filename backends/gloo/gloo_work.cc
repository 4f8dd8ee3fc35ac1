// Works of the gloo backend (see gloo_work.h).
#include "gloo_work.h"

#include <algorithm>

namespace procgroup::gloo_backend {
namespace {

constexpr auto kWaitGrace = std::chrono::seconds(2);

}  // namespace

pg_status_t Work::wait(int64_t timeout_ms, std::string* message) const {
  return wait_until(timeout_ms < 0 ? std::max(deadline_, Clock::now()) + kWaitGrace
                                   : kit::deadline_after(timeout_ms),
                    message);
}

}  // namespace procgroup::gloo_backend
