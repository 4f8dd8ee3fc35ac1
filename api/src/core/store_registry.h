// One store per (URL, rank, world size, token) in a process, shared by every group created
// on it: a second group from the same environment (an nccl group beside a gloo one, as
// PyTorch programs do) must not bind MASTER_PORT again. Rank 0's TCP server then stays up
// until the process exits, as PyTorch's default store does: a rank that creates its next
// group before rank 0 has left the previous one would otherwise connect to a server about
// to close, and fail with "connection closed by the store".
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "store/store.h"

namespace procgroup::detail {

struct GroupStore {
  std::shared_ptr<Store> store;
  // The group's id on that store: its name the first time, "name#k" for the k-th group of
  // that name (keys of the earlier ones may still be there). Every rank creates groups in
  // the same order, so every rank derives the same id.
  std::string group_id;
};

Result<GroupStore> open_group_store(const StoreConfig& config, const std::string& group_name);

}  // namespace procgroup::detail
