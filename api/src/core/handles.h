// The handles behind pg_group_t and pg_work_t. A handle is not an address: it encodes a slot
// of a never-freed table and that slot's generation, so a destroyed group or a released work
// is recognised (PG_ERR_INVALID_ARGUMENT naming the call) without touching freed memory.
// A lookup is two loads and a compare; insert and erase are one CAS each on a lock-free free
// list, so the per-operation path takes no lock. Using a handle on one thread while another
// destroys it stays the caller's race, as with free().
//
//   pg_work_t handle = to_work_handle(work_handles().insert(state));
//   PG_ASSIGN_OR_RETURN(WorkState* work, lookup_work(handle, "pg_work_wait"));
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "common/status.h"
#include "procgroup/procgroup.h"

namespace procgroup::detail {

class GroupState;
class WorkState;

template <class T>
class HandleTable {
 public:
  // A new live handle that takes value over; 0, leaving value with the caller, when the
  // table is full (kMaxChunks * kChunkSlots live handles).
  uint64_t insert(std::shared_ptr<T>& value);
  // The object behind a live handle, else nullptr (never created, or erased).
  T* find(uint64_t handle) const;
  // Ends a live handle and gives back its object; nullptr when the handle was not live
  // (erased before: only one of two concurrent erases wins).
  std::shared_ptr<T> erase(uint64_t handle);

 private:
  static constexpr uint32_t kChunkSlots = 4096;
  static constexpr uint32_t kMaxChunks = 4096;

  // generation is odd while the slot holds a live handle; each insert and erase bumps it.
  struct Slot {
    std::atomic<uint32_t> generation{0};
    std::atomic<uint32_t> next_free{0};  // slot index + 1 of the next free slot; 0: end
    std::shared_ptr<T> value;
  };

  Slot* slot(uint32_t index) const;
  // A slot index to fill, from the free list or a new one; UINT32_MAX when full.
  uint32_t take_slot();
  void give_back(uint32_t index);

  std::atomic<Slot*> chunks_[kMaxChunks] = {};
  std::atomic<uint32_t> used_{0};       // slots ever handed out
  std::atomic<uint64_t> free_head_{0};  // (ABA tag << 32) | (slot index + 1)
  std::mutex grow_mutex_;               // only when a new chunk is needed
};

// The process's tables: never destroyed, so a handle used during exit still finds them.
HandleTable<GroupState>& group_handles();
HandleTable<WorkState>& work_handles();

pg_group_t to_group_handle(uint64_t handle);
pg_work_t to_work_handle(uint64_t handle);

// For the C entry points: the live object, or PG_ERR_INVALID_ARGUMENT naming `function` and
// the argument ("pg_allreduce: group is NULL", "...: group is not a live group handle ...").
Result<GroupState*> lookup_group(pg_group_t handle, const char* function,
                                 const char* argument = "group");
Result<WorkState*> lookup_work(pg_work_t handle, const char* function);
Status stale_handle(const char* function, const char* argument, const char* kind,
                    const char* ended_by);

}  // namespace procgroup::detail
