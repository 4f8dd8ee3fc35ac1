// gloo_rendezvous.h — a raw Gloo context for collbench --direct (see gloo_direct.h): its own
// TCP device and a FileStore rendezvous in a directory that only this run uses.
//
//   std::shared_ptr<gloo::Context> context = connect_gloo(comm, timeout);   // collective
#pragma once

#include <gloo/context.h>

#include <chrono>
#include <memory>

#include "runner.h"

namespace procgroup::bench {

// Throws std::runtime_error naming the step that failed.
std::shared_ptr<gloo::Context> connect_gloo(Communicator& comm, std::chrono::milliseconds timeout);

}  // namespace procgroup::bench
