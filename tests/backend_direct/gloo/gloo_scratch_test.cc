// The gloo plugin keeps one grow-only scratch buffer per group for every operation that
// needs one (reduce on non-roots, reduce_scatter, in-place alltoall, in-place gather and
// scatter on the root). In-place alltoall runs its own exchange, so some ranks run it in
// place while their peers do not. These tests issue many such operations at once, of
// sizes that make the scratch grow and shrink back, with different roots and dtypes, and
// only then wait and check every element: two operations sharing the scratch at the same
// time, or one reading it after the next has started, would show up as wrong elements.
#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "gloo_test_support.h"
#include "gloo_typed_buffer.h"

namespace procgroup::gloo_test {
namespace {

// Element counts per rank: grow, shrink below an earlier size, grow past the largest.
const std::vector<size_t> kCounts = {4099, 300001, 7, 65537, 1, 600011, 1024, 250000};
const std::vector<pg_dtype_t> kReduceDtypes = {PG_DTYPE_F32, PG_DTYPE_BF16, PG_DTYPE_I64,
                                               PG_DTYPE_F16};
const std::vector<pg_dtype_t> kMoveDtypes = {PG_DTYPE_F32, PG_DTYPE_I64, PG_DTYPE_I32};

// Distinct per source rank, position and operation; exact in f32, i32 and i64.
double tagged(int rank, size_t i, size_t k) {
  return static_cast<double>(rank * 1000000 + static_cast<int>(k % 8) * 100000 +
                             static_cast<int>(i % 99991));
}

// An issued operation: its buffers live in World::buffers, check() runs once it is done.
struct Issued {
  std::string what;
  Work work;
  std::function<void()> check;
};

struct World {
  explicit World(RankEnv& rank_env) : r(rank_env) {}
  RankEnv& r;
  std::deque<TypedBuffer> buffers;  // stable addresses while operations are in flight
  std::vector<Issued> issued;

  TypedBuffer& buffer(pg_dtype_t dt, size_t n) { return buffers.emplace_back(dt, n); }

  // Compares buf[offset + i] with want(i) for i < n; reports the first mismatch only.
  void expect_values(const TypedBuffer& buf, size_t offset, size_t n,
                     const std::function<double(size_t)>& want, const std::string& what) {
    for (size_t i = 0; i < n; ++i) {
      if (buf.get(offset + i) != want(i)) {
        r.expect(false, what + ": element " + std::to_string(i) + " is " +
                            std::to_string(buf.get(offset + i)) + ", want " +
                            std::to_string(want(i)));
        return;
      }
    }
  }

  void issue(std::string what, const pg_backend_op_t& op, std::function<void()> check) {
    Work w = r.start(op);
    r.expect_status(w.submit_status(), PG_OK, what + " (submit) " + w.error());
    issued.push_back(Issued{std::move(what), std::move(w), std::move(check)});
  }

  // Op k of the mix: reduce, reduce_scatter, alltoall, in-place gather, in-place scatter,
  // each with its own size, dtype and root.
  void issue_op(size_t k) {
    const size_t n = kCounts[k % kCounts.size()];
    const size_t p = static_cast<size_t>(r.size);
    const int root = static_cast<int>(k % p);
    const bool is_root = r.rank == root;
    const pg_reduce_op_t rop = k % 3 == 0 ? PG_REDUCE_MAX : PG_REDUCE_SUM;
    const pg_dtype_t rdt = kReduceDtypes[k % kReduceDtypes.size()];
    const pg_dtype_t mdt = kMoveDtypes[k % kMoveDtypes.size()];
    OpArgs a;
    a.root = root;
    a.reduce_op = rop;
    const std::string suffix = " #" + std::to_string(k) + " n=" + std::to_string(n);
    switch (k % 5) {
      case 0: {  // reduce: non-roots reduce into scratch; their input must stay intact
        TypedBuffer& in = buffer(rdt, n);
        TypedBuffer& out = buffer(rdt, n);
        for (size_t i = 0; i < n; ++i) in.set(i, sample(r.rank, i, rop, rdt));
        const std::string what = std::string("reduce ") + dtype_label(rdt) + suffix;
        issue(what, make_op(PG_OP_REDUCE, in.buffer(), is_root ? out.buffer() : absent(), a),
              [this, &in, &out, n, rop, rdt, is_root, what] {
                if (is_root) {
                  expect_values(
                      out, 0, n, [&](size_t i) { return reduced(r.size, i, rop, rdt); }, what);
                }
                expect_values(
                    in, 0, n, [&](size_t i) { return sample(r.rank, i, rop, rdt); },
                    what + ": input");
              });
        return;
      }
      case 1: {  // reduce_scatter: allreduce of n*p elements into scratch, then a block
        TypedBuffer& in = buffer(rdt, n * p);
        TypedBuffer& out = buffer(rdt, n);
        for (size_t i = 0; i < n * p; ++i) in.set(i, sample(r.rank, i, rop, rdt));
        const size_t mine = static_cast<size_t>(r.rank) * n;
        const std::string what = std::string("reduce_scatter ") + dtype_label(rdt) + suffix;
        issue(what, make_op(PG_OP_REDUCE_SCATTER, in.buffer(), out.buffer(), a),
              [this, &out, n, mine, rop, rdt, what] {
                expect_values(
                    out, 0, n, [&](size_t i) { return reduced(r.size, mine + i, rop, rdt); }, what);
              });
        return;
      }
      case 2: {  // alltoall: in place (outgoing blocks via scratch) on some ranks only
        const bool in_place = (r.rank + k / 5) % 2 == 0;
        TypedBuffer& buf = buffer(mdt, n * p);
        TypedBuffer& out = in_place ? buf : buffer(mdt, n * p);
        for (size_t i = 0; i < n * p; ++i) buf.set(i, tagged(r.rank, i, k));
        const std::string what =
            std::string("alltoall ") + (in_place ? "in place " : "") + dtype_label(mdt) + suffix;
        issue(what, make_op(PG_OP_ALLTOALL, buf.buffer(), out.buffer()), [this, &out, n, k, what] {
          expect_values(
              out, 0, n * r.size,
              [&](size_t i) { return tagged(int(i / n), r.rank * n + i % n, k); }, what);
        });
        return;
      }
      case 3: {  // gather in place: the root's own block goes through scratch
        TypedBuffer& in = buffer(mdt, n);
        TypedBuffer& out = buffer(mdt, n * p);
        for (size_t i = 0; i < n; ++i) in.set(i, tagged(r.rank, i, k));
        for (size_t i = 0; i < n; ++i) out.set(r.rank * n + i, tagged(r.rank, i, k));
        const pg_buffer_t input = is_root ? out.buffer(r.rank * n, n) : in.buffer();
        const std::string what = std::string("gather in place ") + dtype_label(mdt) + suffix;
        issue(what, make_op(PG_OP_GATHER, input, is_root ? out.buffer() : absent(), a),
              [this, &out, n, k, is_root, p, what] {
                if (!is_root) return;
                expect_values(
                    out, 0, n * p, [&](size_t i) { return tagged(int(i / n), i % n, k); }, what);
              });
        return;
      }
      default: {  // scatter in place: gloo's local copy on the root lands in scratch
        TypedBuffer& in = buffer(mdt, n * p);
        TypedBuffer& out = buffer(mdt, n);
        if (is_root) {
          for (size_t i = 0; i < n * p; ++i) in.set(i, tagged(int(i / n), i % n, k));
        }
        const pg_buffer_t output = is_root ? in.buffer(r.rank * n, n) : out.buffer();
        const std::string what = std::string("scatter in place ") + dtype_label(mdt) + suffix;
        issue(what, make_op(PG_OP_SCATTER, is_root ? in.buffer() : absent(), output, a),
              [this, &in, &out, n, k, is_root, what] {
                expect_values(
                    is_root ? in : out, is_root ? r.rank * n : 0, n,
                    [&](size_t i) { return tagged(r.rank, i, k); }, what);
              });
        return;
      }
    }
  }

  // Waits for the newest operation first (the rest are done by then), then for each.
  void wait_and_check() {
    if (!issued.empty()) issued.back().work.wait(60000);
    for (Issued& op : issued) {
      r.expect_status(op.work.wait(60000), PG_OK, op.what + " " + op.work.error());
      op.check();
    }
    issued.clear();
    buffers.clear();
  }
};

class GlooScratch : public ::testing::TestWithParam<int> {};

TEST_P(GlooScratch, ManyInFlightOperationsOfMixedSizes) {
  WorldOptions opts;
  opts.limit_s = 110;
  run_world(GetParam(), opts, [](RankEnv& r) {
    World w(r);
    for (size_t k = 0; k < 40; ++k) w.issue_op(k);  // every kind with every size
    w.wait_and_check();
  });
}

TEST_P(GlooScratch, ReusedAcrossRoundsAndAfterASmallerOperation) {
  // Round by round, with waits in between: a large reduce_scatter leaves the scratch big
  // and full of its data; the smaller operations after it must not see any of it.
  run_world(GetParam(), {}, [](RankEnv& r) {
    World w(r);
    for (size_t round = 0; round < 3; ++round) {
      for (size_t k = round; k < 15; k += 3) w.issue_op(k);
      w.wait_and_check();
    }
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSize, GlooScratch, ::testing::Values(2, 3));

}  // namespace
}  // namespace procgroup::gloo_test
