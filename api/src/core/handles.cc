#include "core/handles.h"

#include "core/group.h"
#include "core/work.h"

namespace procgroup::detail {
namespace {

static_assert(sizeof(void*) == sizeof(uint64_t), "handles encode 64 bits in a pointer");

uint32_t index_of(uint64_t handle) { return static_cast<uint32_t>(handle) - 1; }
uint32_t generation_of(uint64_t handle) { return static_cast<uint32_t>(handle >> 32); }

}  // namespace

template <class T>
typename HandleTable<T>::Slot* HandleTable<T>::slot(uint32_t index) const {
  if (index / kChunkSlots >= kMaxChunks) return nullptr;
  Slot* chunk = chunks_[index / kChunkSlots].load(std::memory_order_acquire);
  return chunk == nullptr ? nullptr : chunk + index % kChunkSlots;
}

template <class T>
uint32_t HandleTable<T>::take_slot() {
  uint64_t head = free_head_.load(std::memory_order_acquire);
  while (static_cast<uint32_t>(head) != 0) {
    const uint32_t index = static_cast<uint32_t>(head) - 1;
    // Slots are never freed, so reading a stale next_free is safe; the tag defeats ABA.
    const uint64_t next =
        ((head >> 32) + 1) << 32 | slot(index)->next_free.load(std::memory_order_relaxed);
    if (free_head_.compare_exchange_weak(head, next, std::memory_order_acquire,
                                         std::memory_order_acquire))
      return index;
  }
  const uint32_t index = used_.fetch_add(1, std::memory_order_relaxed);
  if (index / kChunkSlots >= kMaxChunks) {
    used_.fetch_sub(1, std::memory_order_relaxed);
    return UINT32_MAX;
  }
  if (slot(index) == nullptr) {
    std::lock_guard lock(grow_mutex_);
    auto& chunk = chunks_[index / kChunkSlots];
    if (chunk.load(std::memory_order_relaxed) == nullptr)
      chunk.store(new Slot[kChunkSlots], std::memory_order_release);  // never freed
  }
  return index;
}

template <class T>
void HandleTable<T>::give_back(uint32_t index) {
  uint64_t head = free_head_.load(std::memory_order_relaxed);
  do {
    slot(index)->next_free.store(static_cast<uint32_t>(head), std::memory_order_relaxed);
  } while (!free_head_.compare_exchange_weak(head, ((head >> 32) + 1) << 32 | (index + 1),
                                             std::memory_order_release, std::memory_order_relaxed));
}

template <class T>
uint64_t HandleTable<T>::insert(std::shared_ptr<T>& value) {
  const uint32_t index = take_slot();
  if (index == UINT32_MAX) return 0;
  Slot* s = slot(index);
  s->value = std::move(value);
  const uint32_t generation = s->generation.load(std::memory_order_relaxed) + 1;  // odd: live
  s->generation.store(generation, std::memory_order_release);
  return static_cast<uint64_t>(generation) << 32 | (index + 1);
}

template <class T>
T* HandleTable<T>::find(uint64_t handle) const {
  const Slot* s = slot(index_of(handle));
  if (s == nullptr || (generation_of(handle) & 1u) == 0 ||
      s->generation.load(std::memory_order_acquire) != generation_of(handle))
    return nullptr;
  return s->value.get();
}

template <class T>
std::shared_ptr<T> HandleTable<T>::erase(uint64_t handle) {
  Slot* s = slot(index_of(handle));
  uint32_t generation = generation_of(handle);
  if (s == nullptr || (generation & 1u) == 0 ||
      !s->generation.compare_exchange_strong(generation, generation + 1, std::memory_order_acq_rel))
    return nullptr;
  std::shared_ptr<T> value = std::move(s->value);
  give_back(index_of(handle));
  return value;
}

template class HandleTable<GroupState>;
template class HandleTable<WorkState>;

HandleTable<GroupState>& group_handles() {
  static auto* table = new HandleTable<GroupState>;  // never destroyed: see handles.h
  return *table;
}

HandleTable<WorkState>& work_handles() {
  static auto* table = new HandleTable<WorkState>;
  return *table;
}

pg_group_t to_group_handle(uint64_t handle) { return reinterpret_cast<pg_group_t>(handle); }
pg_work_t to_work_handle(uint64_t handle) { return reinterpret_cast<pg_work_t>(handle); }

Status stale_handle(const char* function, const char* argument, const char* kind,
                    const char* ended_by) {
  return make_error(PG_ERR_INVALID_ARGUMENT,
                    "{}: {} is not a live {} handle ({} already, or never created by procgroup)",
                    function, argument, kind, ended_by);
}

Result<GroupState*> lookup_group(pg_group_t handle, const char* function, const char* argument) {
  if (handle == nullptr)
    return make_error(PG_ERR_INVALID_ARGUMENT, "{}: {} is NULL", function, argument);
  GroupState* group = group_handles().find(reinterpret_cast<uint64_t>(handle));
  if (group == nullptr) return stale_handle(function, argument, "group", "destroyed");
  return group;
}

Result<WorkState*> lookup_work(pg_work_t handle, const char* function) {
  if (handle == nullptr) return make_error(PG_ERR_INVALID_ARGUMENT, "{}: work is NULL", function);
  WorkState* work = work_handles().find(reinterpret_cast<uint64_t>(handle));
  if (work == nullptr) return stale_handle(function, "work", "work", "released");
  return work;
}

}  // namespace procgroup::detail
