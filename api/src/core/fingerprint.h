// PROCGROUP_DEBUG=detail: before each collective, ranks exchange a fingerprint of it (seq,
// op, dtype, count, root, reduce op, device) and compare. A difference fails the call on
// every rank with PG_ERR_MISMATCH naming the first rank that differs from rank 0, e.g.
// "rank 1 called broadcast(f32, 1024, root=0) as op #17 while rank 0 called
// allreduce(f32, 1024, sum)" — instead of a hang or silently wrong data.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "common/deadline.h"
#include "core/op_args.h"

namespace procgroup::detail {

class GroupState;

struct Fingerprint {
  int64_t seq, op, dtype, count, root, reduce_op, device, reserved;
};

Fingerprint fingerprint_of(const OpArgs& args, uint64_t seq);
// "broadcast(f32, 1024, root=0)"
std::string describe_call(const Fingerprint& f);
// OK when all agree; else PG_ERR_MISMATCH naming the first rank that differs from rank 0.
Status compare_fingerprints(std::span<const Fingerprint> all);

// Exchanges this collective's fingerprint over the group's send/recv and compares.
Status check_fingerprints(GroupState& group, const OpArgs& args, uint64_t seq,
                          Deadline deadline);

}  // namespace procgroup::detail
