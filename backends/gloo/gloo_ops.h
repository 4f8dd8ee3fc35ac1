// gloo_ops.h — maps procgroup operations onto Gloo's collectives and unbound buffers.
//
// run_collective() runs on the group's worker thread with the plan made when the op was
// issued (gloo_plan.h), and throws Gloo's exceptions, which the group turns into statuses:
//
//   Scratch scratch;                              // one per group, kept by the worker
//   OpEnv env{context, host, rank, size, tag, remaining, AllreduceChoice::kAuto, &scratch};
//   st = run_collective(env, op, work->plan);     // blocking
// Send/recv live in gloo_p2p.h.
#ifndef PROCGROUP_BACKENDS_GLOO_GLOO_OPS_H_
#define PROCGROUP_BACKENDS_GLOO_GLOO_OPS_H_

#include <gloo/context.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "gloo_plan.h"
#include "procgroup/procgroup_backend.h"

namespace procgroup::gloo_backend {

// Which allreduce algorithm to run: ring for large messages, bcube (recursive
// halving/doubling generalised to any size) for small ones, unless forced.
enum class AllreduceChoice { kAuto, kRing, kBcube };

// Messages at or below this many bytes use bcube under kAuto.
inline constexpr size_t kBcubeMaxBytes = 256 * 1024;

// Grow-only scratch memory of one group: its collectives run one at a time on its worker and
// ask for scratch at most once, so one buffer serves them all and a large reduce or
// reduce_scatter does not map and fault in a fresh one per call (glibc mmaps blocks from
// 32 MiB up). It keeps its high-water mark until the group is destroyed (README.md).
class Scratch {
 public:
  // At least bytes of uninitialised memory; valid until the next get().
  std::byte* get(size_t bytes);

 private:
  std::unique_ptr<std::byte[]> data_;
  size_t capacity_ = 0;
};

struct OpEnv {
  std::shared_ptr<gloo::Context> context;
  const pg_host_services_t* host;
  int rank;
  int size;
  uint32_t tag;                       // collective tag, the same on every rank
  std::chrono::milliseconds timeout;  // time left for this operation
  AllreduceChoice allreduce;
  Scratch* scratch;  // the group's; only this operation uses it while it runs
};

// Runs one collective (not send/recv) to completion; AVG divides through host->scale_down.
// Throws gloo::IoException on communication failures and timeouts, other exceptions on
// internal failures.
Status run_collective(const OpEnv& env, const pg_backend_op_t& op, const Plan& plan);

// The Gloo tag of a group's count-th collective: 8 bits of count, then 24 bits of a hash
// of what every rank must pass alike (op, dtype, count per rank, root, reduce op). Ranks
// that disagree use different slots, so their messages never meet: none can receive more
// than it posted (Gloo would abort the process) or less (a silently wrong result); they
// time out instead, and the message says what this rank passed.
uint32_t collective_tag(uint32_t count, const pg_backend_op_t& op, const Plan& plan);

}  // namespace procgroup::gloo_backend

#endif  // PROCGROUP_BACKENDS_GLOO_GLOO_OPS_H_
