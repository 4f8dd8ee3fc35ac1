// Works of the ucx backend (see ucx_work.h).
#include "ucx_work.h"

#include <algorithm>

#include "ucx_group.h"

namespace procgroup::ucx_backend {
namespace {

// A wait without its own timeout ends by the work's deadline (the group fails every work
// then); the grace covers the breaking of the group.
constexpr auto kWaitGrace = std::chrono::seconds(5);

}  // namespace

void Work::complete(Status outcome) {
  if (done()) return;
  outcome_ = std::move(outcome);
  done_.store(true, std::memory_order_release);
}

pg_status_t Work::result(std::string* message) const {
  if (message != nullptr && !outcome_.ok()) *message = outcome_.message;
  return outcome_.code;
}

pg_status_t Work::test(std::string* message) {
  if (!done()) group_->poll_for_test();
  return done() ? result(message) : PG_PENDING;
}

pg_status_t Work::wait(int64_t timeout_ms, std::string* message) {
  if (!done()) {
    // Cheap clock reads, a few ms late at worst; huge timeouts saturate (mean "forever").
    const auto until = timeout_ms < 0
                           ? std::max(deadline_, kit::lazy_deadline_after(0)) + kWaitGrace
                           : kit::lazy_deadline_after(timeout_ms);
    group_->wait_for(*this, until);
  }
  return done() ? result(message) : PG_PENDING;
}

}  // namespace procgroup::ucx_backend
