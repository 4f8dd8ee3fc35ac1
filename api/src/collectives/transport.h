// What the core's fallback collectives need from below: asynchronous, tagged, byte-wise
// send and receive between the ranks of one group. The core adapts a backend's send/recv
// entries to this; tests use an in-memory implementation with threads as ranks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"

namespace procgroup::detail {

// One posted send or receive. wait() returns once it completes (or fails, or the
// transport's deadline for the current collective passes).
class PendingIo {
 public:
  virtual ~PendingIo() = default;
  virtual Status wait() = 0;
};
using Request = std::unique_ptr<PendingIo>;

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Messages between a pair of ranks with the same tag arrive in posting order. A
  // receive's size must equal the matching send's size.
  virtual Result<Request> isend(int peer, const void* data, size_t bytes, uint64_t tag) = 0;
  virtual Result<Request> irecv(int peer, void* data, size_t bytes, uint64_t tag) = 0;
};

// Waits for every request (all of them, even after a failure, so no buffer is still in
// use on return) and returns the first failure. Null entries are skipped; the vector is
// left empty.
Status wait_all(std::vector<Request>& requests);

}  // namespace procgroup::detail
