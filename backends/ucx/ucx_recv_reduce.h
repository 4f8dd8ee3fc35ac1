// ucx_recv_reduce.h — receives that reduce while UCX unpacks them.
//
// A pipelined reduction would otherwise copy each received chunk into a temporary and read
// it back to combine it with this rank's contribution. Received through a generic UCP
// datatype instead, every fragment UCX takes out of the transport (a shared-memory FIFO
// element, a TCP segment) is combined straight into the destination, by the core's kernels
// (host->reduce_to):
//
//   ReduceInto into = op.reduce_into(dst, mine, bytes);  // the op's dtype, reduce op, host
//   io.recv_reduce(peer, &into, step);   // dst[i] = mine[i] op received[i]; dst may be mine
//   PG_KIT_CO_TRY(co_await io);
//   PG_KIT_CO_TRY(into.failure);         // a kernel that failed (dst is then not valid)
#ifndef PROCGROUP_BACKENDS_UCX_UCX_RECV_REDUCE_H_
#define PROCGROUP_BACKENDS_UCX_UCX_RECV_REDUCE_H_

#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "procgroup/procgroup_backend.h"
#include "ucx_status.h"

namespace procgroup::ucx_backend {

struct ReduceInto {
  std::byte* dst = nullptr;
  const std::byte* mine = nullptr;
  size_t es = 1;
  pg_dtype_t dtype = PG_DTYPE_U8;
  pg_reduce_op_t op = PG_REDUCE_SUM;
  uint64_t bytes = 0;
  const pg_host_services_t* host = nullptr;
  Status failure{};  // the first kernel failure; later fragments are then skipped
  // Elements cut by a fragment boundary collect their bytes here until complete.
  struct Split {
    uint64_t element;
    size_t filled;
    alignas(8) std::byte data[8];
  };
  std::vector<Split> split{};
};

// The generic datatype ReduceInto receives use (one per group; release with ucp_dt_destroy).
Status make_reduce_datatype(ucp_datatype_t* out);
// Its operations, for tests that play UCX's part.
const ucp_generic_dt_ops_t& reduce_datatype_ops();

}  // namespace procgroup::ucx_backend

#endif  // PROCGROUP_BACKENDS_UCX_UCX_RECV_REDUCE_H_
