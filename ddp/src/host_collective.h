// host_collective.h — ddp's small control-plane collectives (the Reducer's agreement check
// and rebuild order, checkpoint outcomes, CPU tensors in a broadcast) on host memory, on
// any backend. A backend without CPU buffers (NCCL) gets them staged through memory on
// `via`'s device: copied there, reduced with via's stream, copied back. Internal to ddp.
//
//   detail::host_allgather(group, std::span<const int64_t>(mine), std::span(all), exec);
#pragma once

#include <span>
#include <type_traits>

#include "device.h"
#include "procgroup/procgroup.hpp"

namespace procgroup::ddp::detail {

// True when the group's backend takes CPU buffers.
bool backend_has_cpu(const Group& group);

// Runs fn(input, output) on host buffers and waits for it (input may be NULL, in place).
void run_host_collective(const Group& group, Group::CFn fn, const pg_buffer_t* input,
                         const pg_buffer_t& output, const pg_op_options_t& options,
                         const Exec& via);

template <class T>
void host_allgather(const Group& group, std::span<const T> in, std::span<T> out,
                    const Exec& via) {
  const pg_buffer_t b_in = procgroup::buffer(in);
  run_host_collective(group, pg_allgather, &b_in, procgroup::buffer(out), op_options(), via);
}

template <class T>
void host_broadcast(const Group& group, std::span<T> data, int root, const Exec& via) {
  run_host_collective(group, pg_broadcast, nullptr, procgroup::buffer(data),
                      op_options(ReduceOp::kSum, root), via);
}

}  // namespace procgroup::ddp::detail
