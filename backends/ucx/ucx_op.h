// ucx_op.h — one operation in flight inside a ucx group: its arguments, the coroutine that
// runs it, its outstanding UCX requests and scratch memory. Algorithms receive an Op& and
// talk through Io (ucx_io.h):
//
//   Task ring(Op& op) {
//     std::byte* tmp = op.scratch(bytes);      // reused across ops, freed with the group
//     Io io(op);
//     io.recv(op.left(), tmp, bytes, step);    // tags: this collective's number + step
//     ...
//   }
//
// An Op is finished when its coroutine has returned AND every request it posted has
// completed (an algorithm that fails early may leave requests behind; the group cancels
// them). Only then is its Work completed, so UCX never touches a buffer the caller got back.
#ifndef PROCGROUP_BACKENDS_UCX_UCX_OP_H_
#define PROCGROUP_BACKENDS_UCX_UCX_OP_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "procgroup/backend_kit/kernels.hpp"
#include "procgroup/procgroup_backend.h"
#include "ucx_algorithms.h"
#include "ucx_recv_reduce.h"
#include "ucx_status.h"
#include "ucx_task.h"
#include "ucx_work.h"

namespace procgroup::ucx_backend {

class UcxGroup;
class Io;

// Lists linked through their nodes' own prev and next, so that nothing allocates: the
// group's running ops, an op's Ios with requests outstanding, an Io's requests.
template <class Node>
void list_push(Node*& head, Node* node) {
  node->prev = nullptr;
  node->next = head;
  if (head != nullptr) head->prev = node;
  head = node;
}
template <class Node>
void list_remove(Node*& head, Node* node) {
  if (node->prev != nullptr) node->prev->next = node->next;
  if (node->next != nullptr) node->next->prev = node->prev;
  if (head == node) head = node->next;
  node->prev = node->next = nullptr;
}

struct Op {
  UcxGroup* group = nullptr;
  const pg_host_services_t* host = nullptr;  // the core's services: its reduction kernels
  std::shared_ptr<Work> work;
  pg_backend_op_t desc{};
  Plan plan;
  int rank = 0;
  int size = 1;
  uint64_t number = 0;  // collectives: the group's collective counter (same on every rank)
  uint16_t fingerprint = 0;  // collectives: OpFingerprint of what this rank passed (make_task)
  Clock::time_point deadline;
  Task task;

  int pending = 0;         // UCX requests posted and not completed
  Io* ios = nullptr;       // Ios that have requests outstanding (for cancel and messages)
  bool task_done = false;  // the coroutine returned
  bool finished = false;   // the work was completed
  bool queued = false;     // in the group's finalize_ list
  Status failure;          // set when the group breaks while the op runs
  std::vector<ScratchLease> leases;
  Op* prev = nullptr;  // the group's list of running ops
  Op* next = nullptr;

  int left() const { return (rank + size - 1) % size; }
  int right() const { return (rank + 1) % size; }
  pg_dtype_t dtype() const { return plan.dtype; }
  size_t es() const { return plan.es; }

  // Bytes of scratch memory, valid until the op finishes (64-byte aligned).
  std::byte* scratch(size_t bytes);

  // out = a op b over count elements of the op's dtype (AVG: sum), by the core's kernels.
  [[nodiscard]] Status combine(void* out, const void* a, const void* b, size_t count) const {
    return kit::reduce_to(host, out, a, b, count, plan.dtype, desc.reduce_op);
  }
  // The target of a receive that reduces as it unpacks (ucx_recv_reduce.h): bytes of
  // dst = mine op received.
  ReduceInto reduce_into(std::byte* dst, const std::byte* mine, uint64_t bytes) const {
    return ReduceInto{.dst = dst,
                      .mine = mine,
                      .es = plan.es,
                      .dtype = plan.dtype,
                      .op = desc.reduce_op,
                      .bytes = bytes,
                      .host = host};
  }
  // AVG's division by the group size; nothing for other reduce ops.
  [[nodiscard]] Status finish_avg(void* data, size_t count) const {
    if (desc.reduce_op != PG_REDUCE_AVG) return {};
    return kit::scale_down(host, data, count, plan.dtype, static_cast<uint64_t>(size));
  }
};

}  // namespace procgroup::ucx_backend

#endif  // PROCGROUP_BACKENDS_UCX_UCX_OP_H_
