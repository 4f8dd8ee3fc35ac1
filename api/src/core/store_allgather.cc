// GroupState::store_allgather: a few bytes from every rank through the rendezvous store.
// The core's own metadata (split colours, PROCGROUP_DEBUG=detail fingerprints) normally
// travels as a CPU collective; a backend that takes no CPU buffers (nccl) cannot carry it,
// so it goes through the store instead: slower, but only metadata and only then.
#include <fmt/format.h>

#include "core/group.h"

namespace procgroup::detail {

bool GroupState::takes_cpu_buffers() const {
  return (plugin_->devices & (1u << PG_DEVICE_CPU)) != 0;
}

Result<std::vector<Bytes>> GroupState::store_allgather(std::string_view purpose, uint64_t index,
                                                        std::span<const uint8_t> mine,
                                                        Deadline deadline) {
  auto key = [&](uint64_t i, int r) { return fmt::format("pg/{}/core/{}/{}/{}", id_, purpose, i, r); };
  PG_RETURN_IF_ERROR(root_store_->set(key(index, rank()), mine));
  std::vector<Bytes> all(static_cast<size_t>(size()));
  for (int r = 0; r < size(); ++r) {
    if (r == rank()) {
      all[r].assign(mine.begin(), mine.end());
      continue;
    }
    auto value = root_store_->get(key(index, r), deadline.remaining());
    if (!value.ok()) {
      return value.status().with_context(
          fmt::format("waiting for rank {}'s {} #{} in the store", r, purpose, index));
    }
    all[r] = std::move(*value);
  }
  // Every rank posted #index only after reading all of #index-1, so nobody needs this
  // rank's #index-1 any more: the store holds at most two rounds of keys per purpose.
  if (index > 1) (void)root_store_->remove(key(index - 1, rank()));
  return all;
}

}  // namespace procgroup::detail
