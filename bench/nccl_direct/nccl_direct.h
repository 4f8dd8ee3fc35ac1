// nccl_direct.h — collbench --direct with -g cuda: the same collectives on a raw NCCL
// communicator, with no procgroup between the caller and NCCL, to measure what procgroup's
// core and nccl plugin add. The communicator comes from ncclCommInitRank with a
// ncclUniqueId that rank 0 makes and sends to the others through collbench's own group
// (comm.broadcast). Operations run on a stream of the engine's own and are timed by the host
// clock up to a stream synchronisation after the last one (nccl-tests' method, which the
// procgroup side uses too); -z 1 waits for each before the next.
//
//   auto direct = make_nccl_direct_engine(comm, device);   // collective
//   direct->run(call, 20, false);
#pragma once

#include <memory>

#include "runner.h"

namespace procgroup::bench {

// Collective over comm's ranks; device is this rank's GPU. Throws std::runtime_error with
// NCCL's message (and ncclGetLastError) on failure.
std::unique_ptr<Engine> make_nccl_direct_engine(Communicator& comm, int device);

}  // namespace procgroup::bench
