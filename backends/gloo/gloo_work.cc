// Works of the gloo backend (see gloo_work.h).
#include "gloo_work.h"

#include <algorithm>

#include "gloo_ops.h"

namespace procgroup::gloo_backend {
namespace {

constexpr auto kWaitGrace = std::chrono::seconds(2);

}  // namespace

Work::Work(const pg_backend_op_t& op, const Plan& plan, uint32_t tag, Clock::time_point deadline)
    : op_(op), plan_(plan), tag_(tag), deadline_(deadline) {}

std::string Work::label() const { return op_label(op_); }

pg_status_t Work::wait(int64_t timeout_ms, std::string* message) const {
  return wait_until(timeout_ms < 0 ? std::max(deadline_, Clock::now()) + kWaitGrace
                                   : kit::deadline_after(timeout_ms),
                    message);
}

}  // namespace procgroup::gloo_backend
