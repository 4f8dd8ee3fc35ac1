// The fallback algorithms' Transport over a backend's send/recv entries. Every request
// gives up at the operation's deadline, so an emulated collective never outlives the
// group timeout.
#pragma once

#include "collectives/transport.h"
#include "common/deadline.h"

namespace procgroup::detail {

class GroupState;

class BackendTransport final : public Transport {
 public:
  BackendTransport(GroupState& group, uint64_t seq, Deadline deadline)
      : group_(group), seq_(seq), deadline_(deadline) {}
  int rank() const override;
  int size() const override;
  Result<Request> isend(int peer, const void* data, size_t bytes, uint64_t tag) override;
  Result<Request> irecv(int peer, void* data, size_t bytes, uint64_t tag) override;

 private:
  Result<Request> post(pg_op_t op, int peer, void* data, size_t bytes, uint64_t tag);
  GroupState& group_;
  uint64_t seq_;
  Deadline deadline_;
};

}  // namespace procgroup::detail
