// Subgroups from pg_group_split: membership and order by key, every collective inside a
// subgroup, operations in flight on a subgroup and its parent at once, send/recv with
// subgroup ranks, nested splits, ranks that opt out, and the parent after it all.
#include <string>
#include <vector>

#include "scenario.h"

namespace pgtest {
namespace {

std::string who(const RankContext& ctx) { return "rank " + std::to_string(ctx.rank) + ": "; }

// The subgroup's size and this rank's place must match `members` (world ranks in subgroup
// order), and an allgather of world ranks inside it must list exactly them.
void check_membership(RankContext& ctx, pg_group_t sub, const std::vector<int>& members,
                      const std::string& what) {
  int32_t sub_rank = -1, sub_size = -1;
  pg_group_rank(sub, &sub_rank);
  pg_group_size(sub, &sub_size);
  int expected_rank = -1;
  for (size_t i = 0; i < members.size(); ++i)
    if (members[i] == ctx.rank) expected_rank = static_cast<int>(i);
  ctx.report.expect(sub_size == static_cast<int32_t>(members.size()) && sub_rank == expected_rank,
                    who(ctx) + what + ": subgroup rank/size " + std::to_string(sub_rank) + "/" +
                        std::to_string(sub_size) + ", expected " + std::to_string(expected_rank) +
                        "/" + std::to_string(members.size()));
  if (sub_size != static_cast<int32_t>(members.size())) return;
  int32_t mine = ctx.rank;
  std::vector<int32_t> all(members.size(), -1);
  pg_buffer_t in = pg_buffer_cpu(&mine, 1, PG_DTYPE_I32);
  pg_buffer_t out = pg_buffer_cpu(all.data(), all.size(), PG_DTYPE_I32);
  const pg_status_t s = pg_allgather(sub, &in, &out, nullptr, nullptr);
  ctx.report.expect(s == PG_OK && std::vector<int>(all.begin(), all.end()) == members,
                    who(ctx) + what +
                        ": allgather of world ranks inside the subgroup gave the "
                        "wrong members or order (" +
                        pg_status_name(s) + ")");
}

std::vector<CollectiveCase> subgroup_cases(int size) {
  std::vector<CollectiveCase> cases;
  uint32_t salt = 3000;
  for (pg_op_t op : all_collectives())
    for (pg_dtype_t dtype : {PG_DTYPE_F32, PG_DTYPE_BF16, PG_DTYPE_I8, PG_DTYPE_I64})
      for (pg_reduce_op_t redop :
           reduces(op) ? std::vector<pg_reduce_op_t>{PG_REDUCE_SUM, PG_REDUCE_AVG, PG_REDUCE_MAX}
                       : std::vector<pg_reduce_op_t>{PG_REDUCE_SUM})
        for (uint64_t n : {uint64_t{1}, uint64_t{4096 + 3}})
          for (int root = 0; root < (rooted(op) ? size : 1); ++root)
            for (InPlace form : {InPlace::kNo, dtype % 2 ? InPlace::kNullInput : InPlace::kAliased})
              cases.push_back({op, dtype, redop, n, root, form, Pattern::kExact, ++salt});
  return cases;
}

int64_t sum_of(const std::vector<int>& v) {
  int64_t s = 0;
  for (int x : v) s += x;
  return s;
}

// An i64 allreduce of the world rank, started asynchronously.
struct RankSum {
  int64_t value;
  pg_work_t work = nullptr;
  pg_status_t status;
  RankSum(pg_group_t g, int rank) : value(rank) {
    pg_buffer_t b = pg_buffer_cpu(&value, 1, PG_DTYPE_I64);
    status = pg_allreduce(g, nullptr, &b, nullptr, &work);
  }
  pg_status_t wait() {
    if (status == PG_OK) status = pg_work_wait(work, -1);
    pg_work_release(work);
    return status;
  }
};

void subgroups_scenario(RankContext& ctx) {
  const int size = ctx.size, me = ctx.rank;
  ctx.report.step("split by parity");
  // 1. Split by parity; key -rank reverses the order within each color.
  pg_group_t sub = nullptr;
  pg_status_t s = pg_group_split(ctx.group, me % 2, -me, &sub);
  ctx.report.expect(s == PG_OK && sub != nullptr,
                    who(ctx) + "split by parity: " + pg_status_name(s) + ": " + pg_last_error());
  if (sub == nullptr) return;
  std::vector<int> members;
  for (int r = size - 1; r >= 0; --r)
    if (r % 2 == me % 2) members.push_back(r);
  check_membership(ctx, sub, members, "split by parity");
  const int sub_size = static_cast<int>(members.size());
  int32_t sub_rank = 0;
  pg_group_rank(sub, &sub_rank);
  pg_capabilities_t sub_caps = PG_CAPABILITIES_INIT;
  pg_group_capabilities(sub, &sub_caps);

  ctx.report.step("collectives inside the parity subgroup");
  // 2. Every collective inside the subgroup.
  for (const CollectiveCase& c : subgroup_cases(sub_size))
    ctx.report.run(sub, sub_rank, sub_size, sub_caps, c);

  ctx.report.step("operations in flight on the parent and the subgroup");
  // 3. In flight on the parent and the subgroup at once, waited newest first.
  {
    RankSum a(ctx.group, me), b(sub, me), c(ctx.group, me), d(sub, me);
    const int64_t world_sum = int64_t{size} * (size - 1) / 2, sub_sum = sum_of(members);
    ctx.report.expect(d.wait() == PG_OK && d.value == sub_sum,
                      who(ctx) + "subgroup allreduce in flight with the parent's");
    ctx.report.expect(c.wait() == PG_OK && c.value == world_sum,
                      who(ctx) + "parent allreduce in flight with the subgroup's");
    ctx.report.expect(b.wait() == PG_OK && b.value == sub_sum,
                      who(ctx) + "subgroup allreduce in flight with the parent's");
    ctx.report.expect(a.wait() == PG_OK && a.value == world_sum,
                      who(ctx) + "parent allreduce in flight with the subgroup's");
  }

  ctx.report.step("send/recv inside the subgroup");
  // 4. A ring inside the subgroup, addressed by subgroup ranks.
  if (sub_size > 1) {
    const int next = (sub_rank + 1) % sub_size, prev = (sub_rank + sub_size - 1) % sub_size;
    int32_t out[5], in[5] = {-1, -1, -1, -1, -1};
    for (int i = 0; i < 5; ++i) out[i] = me * 1000 + i;
    pg_buffer_t ob = pg_buffer_cpu(out, 5, PG_DTYPE_I32), ib = pg_buffer_cpu(in, 5, PG_DTYPE_I32);
    pg_op_options_t so = PG_OP_OPTIONS_INIT, ro = PG_OP_OPTIONS_INIT;
    so.peer = next;
    ro.peer = prev;
    so.tag = ro.tag = 5;
    pg_work_t rw = nullptr, sw = nullptr;
    pg_status_t rs = pg_recv(sub, &ib, &ro, &rw), ss = pg_send(sub, &ob, &so, &sw);
    if (rs == PG_OK) rs = pg_work_wait(rw, -1);
    if (ss == PG_OK) ss = pg_work_wait(sw, -1);
    pg_work_release(rw);
    pg_work_release(sw);
    ctx.report.expect(rs == PG_OK && ss == PG_OK && in[0] == members[prev] * 1000 &&
                          in[4] == members[prev] * 1000 + 4,
                      who(ctx) + "send/recv between subgroup ranks " + std::to_string(prev) +
                          " -> " + std::to_string(sub_rank) + " got " + std::to_string(in[0]) +
                          " (" + pg_status_name(rs) + ")");
  }

  ctx.report.step("nested split");
  // 5. Split the subgroup again; equal keys keep the parent's order.
  pg_group_t nested = nullptr;
  s = pg_group_split(sub, sub_rank % 2, 0, &nested);
  ctx.report.expect(s == PG_OK && nested != nullptr,
                    who(ctx) + "nested split: " + pg_status_name(s));
  if (nested) {
    std::vector<int> nested_members;
    for (int j = 0; j < sub_size; ++j)
      if (j % 2 == sub_rank % 2) nested_members.push_back(members[j]);
    check_membership(ctx, nested, nested_members, "nested split");
    ctx.report.expect(pg_group_destroy(nested) == PG_OK,
                      who(ctx) + "destroy nested: " + pg_last_error());
  }
  ctx.report.expect(pg_group_destroy(sub) == PG_OK,
                    who(ctx) + "destroy subgroup: " + pg_last_error());

  ctx.report.step("split without the last rank");
  // 6. The last rank opts out and gets no group; the others get one in rank order.
  pg_group_t part = nullptr;
  s = pg_group_split(ctx.group, me == size - 1 ? PG_SPLIT_NO_COLOR : 5, me, &part);
  ctx.report.expect(s == PG_OK && (part == nullptr) == (me == size - 1),
                    who(ctx) + "split with PG_SPLIT_NO_COLOR: " + pg_status_name(s));
  if (part) {
    std::vector<int> part_members;
    for (int r = 0; r < size - 1; ++r) part_members.push_back(r);
    check_membership(ctx, part, part_members, "split without the last rank");
    ctx.report.expect(pg_barrier(part, nullptr, nullptr) == PG_OK,
                      who(ctx) + "barrier without the last rank");
    ctx.report.expect(pg_group_destroy(part) == PG_OK, who(ctx) + "destroy: " + pg_last_error());
  }

  ctx.report.step("the parent after the subgroups");
  // 7. The parent still works after its children are gone.
  ctx.report.expect(pg_barrier(ctx.group, nullptr, nullptr) == PG_OK,
                    who(ctx) + "parent barrier after the subgroups");
  RankSum last(ctx.group, me);
  ctx.report.expect(last.wait() == PG_OK && last.value == int64_t{size} * (size - 1) / 2,
                    who(ctx) + "parent allreduce after the subgroups");
}

}  // namespace

void add_group_scenarios(std::vector<Scenario>& out) {
  out.push_back({"Groups", "Subgroups", subgroups_scenario, 60, 150});
}

}  // namespace pgtest
