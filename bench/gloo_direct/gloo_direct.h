// gloo_direct.h — collbench --direct: the same collectives on a raw Gloo context, with no
// procgroup between the caller and Gloo, to measure what procgroup's core and gloo plugin
// add. Each operation calls the Gloo function and algorithm the gloo backend picks for it
// (backends/gloo/gloo_ops.cc): allreduce bcube up to 256 KiB and ring above
// (PROCGROUP_GLOO_ALLREDUCE=ring|bcube forces one, as for the backend), reduce_scatter as an
// allreduce into scratch plus a copy, and so on; scratch buffers are allocated once.
//
// The context has its own TCP device and rendezvous: a gloo::rendezvous::FileStore in a
// fresh directory that rank 0 creates under PROCGROUP_BENCH_GLOO_STORE_DIR (else $TMPDIR,
// else /tmp) and whose path it sends to the others through comm; it is removed once every
// rank has connected. With several hosts that base directory must be shared.
//
//   auto direct = make_gloo_direct_engine(comm, std::chrono::seconds(300));  // collective
//   direct->run(call, 20, true);
#pragma once

#include <chrono>
#include <memory>

#include "runner.h"

namespace procgroup::bench {

std::unique_ptr<Engine> make_gloo_direct_engine(Communicator& comm,
                                                std::chrono::milliseconds timeout);

}  // namespace procgroup::bench
