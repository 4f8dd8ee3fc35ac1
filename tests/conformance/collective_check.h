// Runs one collective case on one rank and checks every output element against the host
// reference, that an out-of-place input is left intact, and that nothing outside the
// buffers was written (guard bytes on both sides).
//
//   std::string error;
//   auto check = start_case(group, rank, size, caps, c, &error);   // asynchronous
//   ... pg_work_wait(check->work(), -1) ...
//   std::string bad = check->verify();                             // "" when correct
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "procgroup/procgroup.h"
#include "reference.h"

namespace pgtest {

// How the core will run a case, from the capabilities the backend declared (DESIGN §3). In
// CUDA mode (cuda_staging.h) only native routes exist: the core never emulates on device
// memory.
enum class Route { kNative, kNativeSumThenScale, kEmulated, kUnsupported };
Route route_for(const pg_capabilities_t& caps, pg_op_t op, pg_dtype_t dtype, pg_reduce_op_t redop);
const char* route_name(Route route);

// Element storage with guard bytes before and after.
class GuardedBuffer {
 public:
  GuardedBuffer(pg_dtype_t dtype, uint64_t count);
  void* data() { return bytes_.data() + kGuard; }
  const void* data() const { return bytes_.data() + kGuard; }
  uint64_t count() const { return count_; }
  pg_dtype_t dtype() const { return dtype_; }
  std::vector<uint8_t> snapshot() const;                  // the elements' bytes
  bool same_as(const std::vector<uint8_t>& bytes) const;  // elements equal a snapshot
  bool guards_intact() const;
  void fill_poison();
  // Every byte, guards included (what CUDA mode copies to the device and back).
  uint8_t* raw() { return bytes_.data(); }
  size_t raw_size() const { return bytes_.size(); }

 private:
  static constexpr size_t kGuard = 64;  // keeps data 64-byte aligned like the allocation
  pg_dtype_t dtype_;
  uint64_t count_;
  std::vector<uint8_t> bytes_;
};

class PendingCheck {
 public:
  virtual ~PendingCheck() = default;
  virtual std::string verify() = 0;  // after the work completed: "" or the first problem
  pg_work_t work() const { return work_; }
  void release_work();  // pg_work_release, once
  const CollectiveCase& which() const { return case_; }
  Route route() const { return route_; }

 protected:
  PendingCheck(const CollectiveCase& c, Route route) : case_(c), route_(route) {}
  pg_work_t work_ = nullptr;
  CollectiveCase case_;
  Route route_;
};

// Issues c asynchronously. On a submission failure returns nullptr and sets *error; a case
// whose route is kUnsupported must be refused with PG_ERR_UNSUPPORTED, which returns
// nullptr with an empty *error.
std::unique_ptr<PendingCheck> start_case(pg_group_t group, int rank, int size,
                                         const pg_capabilities_t& caps, const CollectiveCase& c,
                                         std::string* error);

// start_case, wait, verify, release: "" on success, else the case and what went wrong.
std::string run_case(pg_group_t group, int rank, int size, const pg_capabilities_t& caps,
                     const CollectiveCase& c);

}  // namespace pgtest
