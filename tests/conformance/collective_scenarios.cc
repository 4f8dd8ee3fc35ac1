// One scenario per collective: every dtype, every reduce op, sizes 0, 1, 7 and 4 Ki + 3,
// every root, out of place and both in-place forms, plus rounding-sensitive data for the
// reductions. "Large" runs 4 Mi + 1 elements for a few dtype/op pairs; "InFlight" keeps
// forty operations in flight and waits for them out of order. "Midsize" (300001
// elements) runs only for the tuning variants that ask for it.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "scenario.h"

namespace pgtest {
namespace {

constexpr uint64_t kSmallSizes[] = {0, 1, 7, 4096 + 3};
constexpr uint64_t kLarge = (uint64_t{4} << 20) + 1;
constexpr uint64_t kMidsize = 300001;
constexpr double kGroupTimeout = 60;

// The in-place form alternates by dtype so both forms meet every op.
InPlace in_place_form(pg_dtype_t dtype) {
  return dtype % 2 ? InPlace::kNullInput : InPlace::kAliased;
}

std::vector<CollectiveCase> op_cases(pg_op_t op, int size) {
  std::vector<CollectiveCase> cases;
  uint32_t salt = 0;
  const std::vector<pg_reduce_op_t> redops =
      reduces(op) ? all_reduce_ops() : std::vector<pg_reduce_op_t>{PG_REDUCE_SUM};
  for (pg_dtype_t dtype : all_dtypes())
    for (pg_reduce_op_t redop : redops)
      for (uint64_t n : kSmallSizes)
        for (int root = 0; root < (rooted(op) ? size : 1); ++root)
          for (InPlace form : {InPlace::kNo, in_place_form(dtype)})
            cases.push_back({op, dtype, redop, n, root, form, Pattern::kExact, ++salt});
  if (!reduces(op)) return cases;
  // Fractional data: exact on 1-2 ranks, bounded rounding above (reference.h).
  for (pg_dtype_t dtype : {PG_DTYPE_F16, PG_DTYPE_BF16, PG_DTYPE_F32, PG_DTYPE_F64})
    for (pg_reduce_op_t redop : all_reduce_ops())
      for (InPlace form : {InPlace::kNo, in_place_form(dtype)})
        cases.push_back({op, dtype, redop, 4096 + 3, size - 1, form, Pattern::kRounding, ++salt});
  return cases;
}

void run_all(RankContext& ctx, const std::vector<CollectiveCase>& cases) {
  for (const CollectiveCase& c : cases) ctx.report.run(ctx.group, ctx.rank, ctx.size, ctx.caps, c);
}

template <pg_op_t kOp>
void op_scenario(RankContext& ctx) {
  run_all(ctx, op_cases(kOp, ctx.size));
}

// Every op once at n elements per rank, in a few dtypes and forms.
void sized_cases(RankContext& ctx, uint64_t n, uint32_t salt) {
  const int last = ctx.size - 1;
  const std::vector<CollectiveCase> cases = {
      {PG_OP_ALLREDUCE, PG_DTYPE_F32, PG_REDUCE_SUM, n, 0, InPlace::kNo},
      {PG_OP_ALLREDUCE, PG_DTYPE_BF16, PG_REDUCE_AVG, n, 0, InPlace::kNullInput},
      {PG_OP_ALLREDUCE, PG_DTYPE_I64, PG_REDUCE_MAX, n, 0, InPlace::kAliased},
      {PG_OP_ALLREDUCE, PG_DTYPE_F32, PG_REDUCE_SUM, n, 0, InPlace::kNo, Pattern::kRounding},
      {PG_OP_BROADCAST, PG_DTYPE_U8, PG_REDUCE_SUM, n, last, InPlace::kNo},
      {PG_OP_REDUCE, PG_DTYPE_F64, PG_REDUCE_MIN, n, ctx.size / 2, InPlace::kNullInput},
      {PG_OP_REDUCE_SCATTER, PG_DTYPE_F16, PG_REDUCE_SUM, n, 0, InPlace::kNo},
      {PG_OP_ALLGATHER, PG_DTYPE_I8, PG_REDUCE_SUM, n, 0, InPlace::kNullInput},
      {PG_OP_ALLTOALL, PG_DTYPE_I32, PG_REDUCE_SUM, n / 4, 0, InPlace::kAliased},
  };
  for (CollectiveCase c : cases) {
    c.salt = ++salt;
    ctx.report.run(ctx.group, ctx.rank, ctx.size, ctx.caps, c);
  }
}

void large_scenario(RankContext& ctx) { sized_cases(ctx, kLarge, 500); }

// Past gloo's bcube limit (256 KiB) and ucx's ring threshold and chunk (1 MiB) in the wide
// dtypes: for variants that force an algorithm or chunking (Large would take 14x longer).
void midsize_scenario(RankContext& ctx) { sized_cases(ctx, kMidsize, 600); }

// Forty collectives of every kind in flight at once; some handles are released while
// pending (the work must still complete: checked after the group is destroyed); the rest
// are polled, then waited for in a different order on each rank.
void in_flight_scenario(RankContext& ctx) {
  constexpr int kOps = 40, kDetached = 5, kWaited = kOps - kDetached;
  std::vector<std::unique_ptr<PendingCheck>> pending = start_mixed_cases(ctx, 0, kOps);
  for (auto& p : pending) {
    if (!p) continue;
    const pg_status_t s = pg_work_test(p->work());
    ctx.report.expect(s == PG_OK || s == PG_PENDING,
                      "pg_work_test on a fresh work returned " + std::string(pg_status_name(s)));
  }
  auto detached = std::make_shared<std::vector<std::unique_ptr<PendingCheck>>>();
  for (int k = kWaited; k < kOps; ++k) {
    if (!pending[k]) continue;
    pending[k]->release_work();
    detached->push_back(std::move(pending[k]));
  }
  Report* report = &ctx.report;
  const int rank = ctx.rank;
  ctx.after_destroy.push_back([detached, report, rank] {
    for (auto& p : *detached) {
      const std::string bad = p->verify();
      report->expect(bad.empty(), bad + " in " + p->which().to_string() +
                                      " (work released while pending, checked after "
                                      "pg_group_destroy on rank " +
                                      std::to_string(rank) + ")");
    }
  });
  // Even ranks wait newest first; odd ranks in a stride-8 permutation (8 and 35 coprime).
  for (int j = 0; j < kWaited; ++j) {
    const int k = ctx.rank % 2 ? (8 * j) % kWaited : kWaited - 1 - j;
    finish_case(ctx, pending[k].get());
  }
}

}  // namespace

void add_collective_scenarios(std::vector<Scenario>& out) {
  const double wall = 150;
  out.push_back({"Collectives", "Allreduce", op_scenario<PG_OP_ALLREDUCE>, kGroupTimeout, wall});
  out.push_back({"Collectives", "Broadcast", op_scenario<PG_OP_BROADCAST>, kGroupTimeout, wall});
  out.push_back({"Collectives", "Reduce", op_scenario<PG_OP_REDUCE>, kGroupTimeout, wall});
  out.push_back({"Collectives", "Allgather", op_scenario<PG_OP_ALLGATHER>, kGroupTimeout, wall});
  out.push_back(
      {"Collectives", "ReduceScatter", op_scenario<PG_OP_REDUCE_SCATTER>, kGroupTimeout, wall});
  out.push_back({"Collectives", "Gather", op_scenario<PG_OP_GATHER>, kGroupTimeout, wall});
  out.push_back({"Collectives", "Scatter", op_scenario<PG_OP_SCATTER>, kGroupTimeout, wall});
  out.push_back({"Collectives", "Alltoall", op_scenario<PG_OP_ALLTOALL>, kGroupTimeout, wall});
  // Up to 4 ranks: every rank verifies every element of every large result.
  out.push_back({"Collectives", "Large", large_scenario, kGroupTimeout, 300, 0, false, 4});
  out.push_back(
      {"Collectives", "Midsize", midsize_scenario, kGroupTimeout, wall, 0, false, 4, true});
  out.push_back({"Collectives", "InFlight", in_flight_scenario, kGroupTimeout, wall});
}

}  // namespace pgtest
