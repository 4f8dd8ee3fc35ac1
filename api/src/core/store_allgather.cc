// GroupState::store_allgather: a few bytes from every rank through the rendezvous store.
// The core's own metadata (split colours, PROCGROUP_DEBUG=detail fingerprints) normally
// travels as a CPU collective; a backend that takes no CPU buffers (nccl) cannot carry it,
// so it goes through the store instead: slower, but only metadata and only then.
#include <fmt/format.h>

#include <algorithm>

#include "core/group.h"

namespace procgroup::detail {

bool GroupState::takes_cpu_buffers() const {
  return (plugin_->devices & (1u << PG_DEVICE_CPU)) != 0;
}

Status GroupState::store_allgather(std::string_view purpose, uint64_t index,
                                   std::span<const uint8_t> mine, std::span<uint8_t> all,
                                   Deadline deadline) {
  auto key = [&](uint64_t i, int r) { return fmt::format("pg/{}/core/{}/{}/{}", id_, purpose, i, r); };
  PG_RETURN_IF_ERROR(root_store_->set(key(index, rank()), mine));
  for (int r = 0; r < size(); ++r) {
    std::span<uint8_t> slot = all.subspan(static_cast<size_t>(r) * mine.size(), mine.size());
    if (r == rank()) {
      std::copy(mine.begin(), mine.end(), slot.begin());
      continue;
    }
    auto value = root_store_->get(key(index, r), deadline.remaining());
    if (!value.ok()) {
      return value.status().with_context(
          fmt::format("waiting for rank {}'s {} #{} in the store", r, purpose, index));
    }
    if (value->size() != mine.size())
      return make_error(PG_ERR_STORE, "rank {} sent a malformed {} ({} bytes, not {})", r,
                        purpose, value->size(), mine.size());
    std::copy(value->begin(), value->end(), slot.begin());
  }
  // Every rank posted #index only after reading all of #index-1, so nobody needs this
  // rank's #index-1 any more: the store holds at most two rounds of keys per purpose.
  if (index > 1) (void)root_store_->remove(key(index - 1, rank()));
  return ok_status();
}

}  // namespace procgroup::detail
