// pg_group_split: ranks exchange (color, key) over the parent (through the store when the
// backend takes no CPU buffers), and each color becomes a group ordered by (key, parent
// rank) under a group id every member derives identically. The backend makes it with its
// group_split entry when it has one (every parent rank calls it, PG_SPLIT_NO_COLOR ones
// included), else with group_create through the same store.
#include <algorithm>
#include <span>

#include "core/dispatch.h"
#include "core/group.h"
#include "core/plugin_call.h"

namespace procgroup::detail {

Result<std::shared_ptr<GroupState>> GroupState::split(int color, int key) {
  if (color < 0 && color != PG_SPLIT_NO_COLOR)
    return make_error(PG_ERR_INVALID_ARGUMENT,
                      "pg_group_split: color {} is negative (use PG_SPLIT_NO_COLOR to opt out)",
                      color);
  PG_RETURN_IF_ERROR(check_usable());
  // Every member calls split in the same order, so this count agrees across ranks.
  const uint64_t split_index = ++splits_;

  std::vector<int32_t> mine{color, key};
  std::vector<int32_t> all(2 * static_cast<size_t>(size()));
  if (takes_cpu_buffers()) {
    pg_buffer_t in = pg_buffer_cpu(mine.data(), 2, PG_DTYPE_I32);
    pg_buffer_t out = pg_buffer_cpu(all.data(), all.size(), PG_DTYPE_I32);
    pg_op_options_t options = PG_OP_OPTIONS_INIT;
    PG_ASSIGN_OR_RETURN(OpArgs args,
                        make_op_args(PG_OP_ALLGATHER, &in, &out, options, rank(), size()));
    std::shared_ptr<WorkState> work;
    PG_RETURN_IF_ERROR(submit_op(*this, args, &work));
    PG_RETURN_IF_ERROR(
        work->wait(Deadline::never()).with_context("pg_group_split: exchanging colors"));
  } else {
    PG_RETURN_IF_ERROR(
        store_allgather("split", split_index,
                        {reinterpret_cast<const uint8_t*>(mine.data()), sizeof(int32_t) * mine.size()},
                        {reinterpret_cast<uint8_t*>(all.data()), sizeof(int32_t) * all.size()},
                        Deadline::after(timeout_))
            .with_context("pg_group_split: exchanging colors"));
  }
  const bool by_backend = plugin_->group_split != nullptr;
  if (color == PG_SPLIT_NO_COLOR) {
    if (by_backend) PG_RETURN_IF_ERROR(split_without_color(key));
    return std::shared_ptr<GroupState>();
  }

  std::vector<std::pair<int32_t, int>> members;  // (key, parent rank)
  for (int r = 0; r < size(); ++r)
    if (all[2 * r] == color) members.emplace_back(all[2 * r + 1], r);
  std::sort(members.begin(), members.end());
  Members child = members_;
  child.size = static_cast<int>(members.size());
  child.rank = static_cast<int>(
      std::find_if(members.begin(), members.end(), [&](auto& m) { return m.second == rank(); }) -
      members.begin());
  // The device a rank uses stays its node-local one, so local rank/size carry over.
  std::string child_id = fmt::format("{}/split{}.{}", id_, split_index, color);
  std::shared_ptr<GroupState> group(
      new GroupState(child_id, child, timeout_, plugin_, root_store_, false, diagnostics_, hints_));
  const SplitFrom from{backend_group_, color, key};
  PG_RETURN_IF_ERROR(group->create_backend_group(by_backend ? &from : nullptr));
  return group;
}

Status GroupState::split_without_color(int key) {
  pg_backend_group_t none = nullptr;
  Status status = call_plugin(plugin_->name, "group_split", [&] {
    return plugin_->group_split(backend_group_, PG_SPLIT_NO_COLOR, key, nullptr, &none);
  });
  if (status.ok() && none != nullptr) {
    Status ignored = call_plugin(plugin_->name, "group_destroy",
                                 [&] { return plugin_->ops->group_destroy(none); });
    (void)ignored;
    status = make_error(PG_ERR_BACKEND,
                        "backend '{}' group_split returned a group for PG_SPLIT_NO_COLOR",
                        plugin_->name);
  }
  return status.with_context(
      fmt::format("splitting group '{}' (rank {} of {}, PG_SPLIT_NO_COLOR) on backend '{}'", id_,
                  members_.rank, members_.size, plugin_->name));
}

}  // namespace procgroup::detail
