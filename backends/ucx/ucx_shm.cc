// Shared-memory windows of a one-host group (see ucx_shm.h).
#include "ucx_shm.h"

#include <sched.h>

#include <atomic>
#include <cstring>

namespace procgroup::ucx_backend {
namespace {

std::string key(const char* what, int rank) {
  return std::string("ucx/") + what + "/" + std::to_string(rank);
}

// Our window as the peers need it: its address, then the packed rkey. Empty: none.
std::string make_window(ucp_context_h context, size_t bytes, ucp_mem_h* memh, std::byte** base,
                        std::string* why_not) {
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  params.address = nullptr;
  params.length = bytes;
  params.flags = UCP_MEM_MAP_ALLOCATE;
  if (const ucs_status_t st = ucp_mem_map(context, &params, memh); st != UCS_OK) {
    *memh = nullptr;
    *why_not =
        std::string("ucp_mem_map of ") + std::to_string(bytes) + " bytes: " + ucs_status_string(st);
    return {};
  }
  ucp_mem_attr_t attr{};
  attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
  void* packed = nullptr;
  size_t packed_size = 0;
  ucs_status_t st = ucp_mem_query(*memh, &attr);
  if (st == UCS_OK) st = ucp_rkey_pack(context, *memh, &packed, &packed_size);
  if (st != UCS_OK) {
    *why_not = std::string("ucp_rkey_pack: ") + ucs_status_string(st);
    return {};
  }
  *base = static_cast<std::byte*>(attr.address);
  const auto address = reinterpret_cast<uint64_t>(attr.address);
  std::string blob(reinterpret_cast<const char*>(&address), sizeof(address));
  blob.append(static_cast<const char*>(packed), packed_size);
  ucp_rkey_buffer_release(packed);
  return blob;
}

}  // namespace

Status ShmWindows::open(ucp_context_h context, const kit::Store& store, int rank, int size,
                        size_t half_bytes, const std::function<ucp_ep_h(int)>& endpoint_of,
                        std::chrono::milliseconds timeout, std::string* why_not) {
  rank_ = rank;
  half_ = half_bytes;
  slots_at_ = (2 * half_bytes + kHeaderBytes - 1) / kHeaderBytes * kHeaderBytes;
  base_.assign(size, nullptr);
  rkeys_.assign(size, nullptr);
  const std::string blob =
      make_window(context, cpu_line() + kHeaderBytes, &memh_, &base_[rank], why_not);
  PG_KIT_TRY(store.set(key("shm", rank), blob));
  bool mapped = !blob.empty();
  std::string value;
  for (int i = 1; i < size && mapped; ++i) {
    const int peer = (rank + i) % size;
    PG_KIT_TRY(store.get(key("shm", peer), timeout.count(), &value));
    uint64_t address = 0;
    if (value.size() <= sizeof(address)) {
      *why_not = "rank " + std::to_string(peer) + " has no window";
      mapped = false;
      break;
    }
    std::memcpy(&address, value.data(), sizeof(address));
    void* local = nullptr;
    ucs_status_t st =
        ucp_ep_rkey_unpack(endpoint_of(peer), value.data() + sizeof(address), &rkeys_[peer]);
    if (st == UCS_OK) st = ucp_rkey_ptr(rkeys_[peer], address, &local);
    if (st != UCS_OK) {
      *why_not = "mapping rank " + std::to_string(peer) + "'s window: " + ucs_status_string(st);
      mapped = false;
    }
    base_[peer] = static_cast<std::byte*>(local);
  }
  // Everyone must have mapped everyone's, with the same layout and chunk size, or nobody
  // uses them (a rank with another plugin version may lay its window out otherwise).
  const std::string layout = std::string(kLayout) + "/";
  const std::string agreed = layout + std::to_string(half_bytes);
  PG_KIT_TRY(store.set(key("shm_ok", rank), mapped ? agreed : "no"));
  ready_ = mapped;
  for (int i = 1; i < size; ++i) {
    const int peer = (rank + i) % size;
    PG_KIT_TRY(store.get(key("shm_ok", peer), timeout.count(), &value));
    if (value != agreed && ready_) {
      *why_not = "rank " + std::to_string(peer);
      if (value == "no") {
        *why_not += " could not map every window";
      } else if (value.starts_with(layout)) {
        *why_not += " uses chunks of " + value.substr(layout.size()) +
                    " bytes (PROCGROUP_UCX_SHM_CHUNK_BYTES)";
      } else {
        *why_not += " lays its window out otherwise (" + value + "): another plugin version";
      }
      ready_ = false;
    }
  }
  if (!ready_) close(context);
  return {};
}

void ShmWindows::publish(uint64_t seq) const {
  std::atomic_ref<uint64_t>(header(rank_, seq)->seq).store(seq, std::memory_order_release);
}

int ShmWindows::first_missing(uint64_t seq) const {
  for (int j = 0; j < static_cast<int>(base_.size()); ++j) {
    if (j == rank_) continue;
    const auto posted = std::atomic_ref<uint64_t>(header(j, seq)->seq);
    if (posted.load(std::memory_order_acquire) != seq) return j;
  }
  return -1;
}

bool ShmWindows::peer_on_my_cpu() const {
  if (!ready_) return false;
  const int cpu = sched_getcpu();  // from the kernel's rseq area: no system call
  if (cpu < 0) return false;
  const int32_t seen = cpu + 1;
  const auto mine = std::atomic_ref<int32_t>(*cpu_of(rank_));
  if (mine.load(std::memory_order_relaxed) != seen) mine.store(seen, std::memory_order_relaxed);
  for (int j = 0; j < static_cast<int>(base_.size()); ++j) {
    if (j != rank_ && std::atomic_ref<int32_t>(*cpu_of(j)).load(std::memory_order_relaxed) == seen)
      return true;
  }
  return false;
}

bool ShmWindows::await_briefly(uint64_t seq) const {
  for (int look = 0; look < 32; ++look) {
    if (all_posted(seq)) return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();  // the spinning core yields to its sibling hyperthread
#endif
  }
  return false;
}

void ShmWindows::close(ucp_context_h context) {
  closed_ = true;
  ready_ = false;
  waiting_.clear();
  arrival = {};
  for (ucp_rkey_h& rkey : rkeys_) {
    if (rkey != nullptr) ucp_rkey_destroy(rkey);
    rkey = nullptr;
  }
  if (memh_ != nullptr) ucp_mem_unmap(context, memh_);
  memh_ = nullptr;
  base_.clear();
}

std::optional<ShmWindows::Waiter> ShmWindows::give_back() {
  if (closed_) return std::nullopt;
  if (waiting_.empty()) {
    busy_ = false;
    return std::nullopt;
  }
  const Waiter next = waiting_.front();  // the turn passes on; busy_ stays set
  waiting_.pop_front();
  return next;
}

}  // namespace procgroup::ucx_backend
