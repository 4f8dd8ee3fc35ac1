// gloo_ops.h — maps procgroup operations onto Gloo's collectives and unbound buffers.
//
// run_collective() and post_p2p() run on the group's worker thread, after validate_op()
// (gloo_plan.h) accepted the operation, and throw Gloo's exceptions, which the group turns
// into statuses:
//
//   OpEnv env{context, host, rank, size, tag, remaining, AllreduceChoice::kAuto};
//   st = run_collective(env, op);                 // blocking
//   auto buf = post_p2p(env, op);                 // send/recv: posted, wait on buf later
#ifndef PROCGROUP_BACKENDS_GLOO_GLOO_OPS_H_
#define PROCGROUP_BACKENDS_GLOO_GLOO_OPS_H_

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "gloo_plan.h"
#include "procgroup/procgroup_backend.h"

namespace procgroup::gloo_backend {

// Which allreduce algorithm to run: ring for large messages, bcube (recursive
// halving/doubling generalised to any size) for small ones, unless forced.
enum class AllreduceChoice { kAuto, kRing, kBcube };

// Messages at or below this many bytes use bcube under kAuto.
inline constexpr size_t kBcubeMaxBytes = 256 * 1024;

struct OpEnv {
  std::shared_ptr<gloo::Context> context;
  const pg_host_services_t* host;
  int rank;
  int size;
  uint32_t tag;                       // collective tag, the same on every rank
  std::chrono::milliseconds timeout;  // time left for this operation
  AllreduceChoice allreduce;
};

// Runs one collective (not send/recv) to completion; AVG divides through host->scale_down.
// Throws gloo::IoException on communication failures and timeouts, other exceptions on
// internal failures.
Status run_collective(const OpEnv& env, const pg_backend_op_t& op);

// Posts a send or recv on an unbound buffer and returns it; the caller waits with
// waitSend/waitRecv. Matching is by (peer, slot) in posting order.
std::unique_ptr<gloo::transport::UnboundBuffer> post_p2p(const OpEnv& env,
                                                         const pg_backend_op_t& op);

// The gloo slot of a send/recv tag: tag with the top bit flipped. This is a bijection,
// and it stays clear of Gloo's collective slots (prefixes 0x01..0x08 in the top byte)
// for every tag below 2^63 + 2^56, which covers user tags and the core's 2^62 range.
inline uint64_t p2p_slot(uint64_t tag) { return tag ^ (uint64_t{1} << 63); }

}  // namespace procgroup::gloo_backend

#endif  // PROCGROUP_BACKENDS_GLOO_GLOO_OPS_H_
