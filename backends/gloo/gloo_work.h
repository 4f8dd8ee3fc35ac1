// gloo_work.h — one issued operation of the gloo backend and its completion.
//
// A Work is shared (std::shared_ptr) by the caller's handle and the group's queues, so a
// handle can be released while the work is pending; it holds no pointer to its group and
// may outlive it. It completes exactly once:
//
//   auto work = std::make_shared<Work>(op, plan, tag, Clock::now() + timeout);
//   work->complete(PG_OK, "");                    // by the group's threads
//   std::string message;
//   pg_status_t st = work->wait(100, &message);   // PG_OK, PG_PENDING or the error
#ifndef PROCGROUP_BACKENDS_GLOO_GLOO_WORK_H_
#define PROCGROUP_BACKENDS_GLOO_GLOO_WORK_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "gloo_p2p.h"
#include "procgroup/backend_kit/work.hpp"
#include "procgroup/procgroup_backend.h"

namespace procgroup::gloo_backend {

// complete(status, message) (once; later calls change nothing and return false), test()
// and notify_on_complete() are kit::Completion's.
class Work : public kit::Completion {
 public:
  Work(const pg_backend_op_t& op_in, const Plan& plan_in, uint32_t tag_in,
       Clock::time_point deadline_in)
      : op(op_in), plan(plan_in), tag(tag_in), deadline(deadline_in) {}

  bool is_p2p() const { return op.op == PG_OP_SEND || op.op == PG_OP_RECV; }
  std::string label() const { return op_label(op); }  // "allreduce #12"

  // Waits up to timeout_ms; < 0: until the work's deadline plus a grace period (every
  // work ends by then: the group enforces the deadline).
  pg_status_t wait(int64_t timeout_ms, std::string* message) const {
    constexpr auto kGrace = std::chrono::seconds(2);
    return Completion::wait(timeout_ms, message, std::max(deadline, Clock::now()) + kGrace);
  }

  const pg_backend_op_t op;
  const Plan plan;     // made once, when the op was issued
  const uint32_t tag;  // the collective tag, the same on every rank
  const Clock::time_point deadline;
  // A posted send/recv, owned by the thread that waits on it.
  std::unique_ptr<P2pTransfer> p2p;
};

}  // namespace procgroup::gloo_backend

#endif  // PROCGROUP_BACKENDS_GLOO_GLOO_WORK_H_
