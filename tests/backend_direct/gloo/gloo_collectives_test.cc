// Every collective of the gloo plugin against a host-computed reference, with ranks as
// real processes: world sizes 1-4, in place (same pointer and absent input) and out of
// place, every root, counts 0, 1, 7 and 4099, all dtypes and reduce ops for the reducing
// collectives. Out-of-place inputs must come back untouched.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gloo_test_support.h"
#include "gloo_typed_buffer.h"

namespace procgroup::gloo_test {
namespace {

const std::vector<size_t> kCounts = {0, 1, 7, 4099};
const std::vector<pg_dtype_t> kAllDtypes = {PG_DTYPE_F32, PG_DTYPE_F64, PG_DTYPE_F16, PG_DTYPE_BF16,
                                            PG_DTYPE_I8,  PG_DTYPE_U8,  PG_DTYPE_I32, PG_DTYPE_I64};
const std::vector<pg_dtype_t> kMoveDtypes = {PG_DTYPE_F32, PG_DTYPE_I32};
const std::vector<pg_reduce_op_t> kReduceOps = {PG_REDUCE_SUM, PG_REDUCE_AVG, PG_REDUCE_PROD,
                                                PG_REDUCE_MIN, PG_REDUCE_MAX};

enum Placement { kOutOfPlace = 0, kSamePointer = 1, kAbsentInput = 2 };
const char* placement_label(int p) {
  return p == kOutOfPlace ? "out-of-place" : p == kSamePointer ? "in-place" : "in-place(absent)";
}

std::string describe(const char* op, pg_dtype_t dt, size_t n, int place, int root = -1,
                     pg_reduce_op_t rop = PG_REDUCE_COUNT_) {
  std::string s = std::string(op) + " " + dtype_label(dt) + " n=" + std::to_string(n) + " " +
                  placement_label(place);
  if (root >= 0) s += " root=" + std::to_string(root);
  if (rop != PG_REDUCE_COUNT_) s += std::string(" ") + reduce_label(rop);
  return s;
}

// Compares buf[offset + i] with want(i) for i < n; reports the first mismatch only.
template <class Want>
void expect_values(RankEnv& r, const TypedBuffer& buf, size_t offset, size_t n, Want want,
                   const std::string& what) {
  for (size_t i = 0; i < n; ++i) {
    const double got = buf.get(offset + i);
    if (got != want(i)) {
      r.expect(false, what + ": element " + std::to_string(i) + " is " + std::to_string(got) +
                          ", want " + std::to_string(want(i)));
      return;
    }
  }
}

// A sample value that tells rank and position apart (exact in f32 and i32).
double tagged(int rank, size_t i) { return static_cast<double>(rank * 100000 + int(i % 50000)); }

class GlooCollectives : public ::testing::TestWithParam<int> {};

TEST_P(GlooCollectives, AllreduceEveryDtypeAndOp) {
  run_world(GetParam(), {}, [](RankEnv& r) {
    for (pg_dtype_t dt : kAllDtypes) {
      for (pg_reduce_op_t rop : kReduceOps) {
        for (size_t n : kCounts) {
          for (int place : {kOutOfPlace, kSamePointer, kAbsentInput}) {
            TypedBuffer in(dt, n), out(dt, n);
            for (size_t i = 0; i < n; ++i) in.set(i, sample(r.rank, i, rop, dt));
            TypedBuffer original = in;
            TypedBuffer& target = place == kOutOfPlace ? out : in;
            const pg_buffer_t input = place == kOutOfPlace    ? in.buffer()
                                      : place == kSamePointer ? in.buffer()
                                                              : absent();
            std::string err;
            const auto what = describe("allreduce", dt, n, place, -1, rop);
            OpArgs a;
            a.reduce_op = rop;
            r.expect_status(r.run(make_op(PG_OP_ALLREDUCE, input, target.buffer(), a), &err), PG_OK,
                            what + " " + err);
            expect_values(
                r, target, 0, n, [&](size_t i) { return reduced(r.size, i, rop, dt); }, what);
            if (place == kOutOfPlace) r.expect(in.same_bytes(original), what + ": input changed");
          }
        }
      }
    }
  });
}

TEST_P(GlooCollectives, ReduceScatterEveryDtypeAndOp) {
  run_world(GetParam(), {}, [](RankEnv& r) {
    for (pg_dtype_t dt : kAllDtypes) {
      for (pg_reduce_op_t rop : kReduceOps) {
        for (size_t n : kCounts) {
          for (int place : {kOutOfPlace, kSamePointer, kAbsentInput}) {
            const size_t total = n * r.size;
            TypedBuffer in(dt, total), out(dt, n);
            for (size_t i = 0; i < total; ++i) in.set(i, sample(r.rank, i, rop, dt));
            TypedBuffer original = in;
            const size_t mine = r.rank * n;
            const pg_buffer_t output = place == kOutOfPlace    ? out.buffer()
                                       : place == kSamePointer ? in.buffer(mine, n)
                                                               : absent();
            std::string err;
            const auto what = describe("reduce_scatter", dt, n, place, -1, rop);
            OpArgs a;
            a.reduce_op = rop;
            r.expect_status(r.run(make_op(PG_OP_REDUCE_SCATTER, in.buffer(), output, a), &err),
                            PG_OK, what + " " + err);
            const TypedBuffer& got = place == kOutOfPlace ? out : in;
            expect_values(
                r, got, place == kOutOfPlace ? 0 : mine, n,
                [&](size_t i) { return reduced(r.size, mine + i, rop, dt); }, what);
            if (place == kOutOfPlace) r.expect(in.same_bytes(original), what + ": input changed");
          }
        }
      }
    }
  });
}

TEST_P(GlooCollectives, ReduceEveryRoot) {
  run_world(GetParam(), {}, [](RankEnv& r) {
    for (pg_dtype_t dt : kMoveDtypes) {
      for (pg_reduce_op_t rop : kReduceOps) {
        for (int root = 0; root < r.size; ++root) {
          for (size_t n : kCounts) {
            for (int place : {kOutOfPlace, kSamePointer}) {
              TypedBuffer in(dt, n), out(dt, n);
              for (size_t i = 0; i < n; ++i) in.set(i, sample(r.rank, i, rop, dt));
              TypedBuffer original = in;
              const bool is_root = r.rank == root;
              pg_buffer_t output = place == kSamePointer ? in.buffer()
                                   : is_root             ? out.buffer()
                                                         : absent();
              OpArgs a;
              a.root = root;
              a.reduce_op = rop;
              std::string err;
              const auto what = describe("reduce", dt, n, place, root, rop);
              r.expect_status(r.run(make_op(PG_OP_REDUCE, in.buffer(), output, a), &err), PG_OK,
                              what + " " + err);
              if (is_root) {
                expect_values(
                    r, place == kSamePointer ? in : out, 0, n,
                    [&](size_t i) { return reduced(r.size, i, rop, dt); }, what);
              }
              if (!is_root || place == kOutOfPlace) {
                r.expect(in.same_bytes(original), what + ": input changed");
              }
            }
          }
        }
      }
    }
  });
}

TEST_P(GlooCollectives, BroadcastEveryRoot) {
  run_world(GetParam(), {}, [](RankEnv& r) {
    for (pg_dtype_t dt : kMoveDtypes) {
      for (int root = 0; root < r.size; ++root) {
        for (size_t n : kCounts) {
          for (int place : {kOutOfPlace, kSamePointer}) {
            TypedBuffer in(dt, n), out(dt, n);
            for (size_t i = 0; i < n; ++i) in.set(i, tagged(r.rank, i));
            TypedBuffer& target = place == kSamePointer ? in : out;
            const pg_buffer_t input = r.rank != root ? absent() : in.buffer();
            OpArgs a;
            a.root = root;
            std::string err;
            const auto what = describe("broadcast", dt, n, place, root);
            r.expect_status(r.run(make_op(PG_OP_BROADCAST, input, target.buffer(), a), &err), PG_OK,
                            what + " " + err);
            expect_values(
                r, target, 0, n, [&](size_t i) { return tagged(root, i); }, what);
          }
        }
      }
    }
  });
}

TEST_P(GlooCollectives, AllgatherAndAlltoall) {
  run_world(GetParam(), {}, [](RankEnv& r) {
    const size_t p = r.size;
    for (pg_dtype_t dt : kMoveDtypes) {
      for (size_t n : kCounts) {
        for (int place : {kOutOfPlace, kSamePointer, kAbsentInput}) {
          // allgather: block j of the output is rank j's input.
          TypedBuffer in(dt, n), out(dt, n * p);
          for (size_t i = 0; i < n; ++i) in.set(i, tagged(r.rank, i));
          for (size_t i = 0; i < n; ++i) out.set(r.rank * n + i, tagged(r.rank, i));
          pg_buffer_t input = place == kOutOfPlace    ? in.buffer()
                              : place == kSamePointer ? out.buffer(r.rank * n, n)
                                                      : absent();
          std::string err;
          auto what = describe("allgather", dt, n, place);
          r.expect_status(r.run(make_op(PG_OP_ALLGATHER, input, out.buffer()), &err), PG_OK,
                          what + " " + err);
          expect_values(
              r, out, 0, n * p, [&](size_t i) { return tagged(int(i / n), i % n); }, what);
          // alltoall: block j of rank r's input goes to block r of rank j's output.
          TypedBuffer a_in(dt, n * p), a_out(dt, n * p);
          for (size_t i = 0; i < n * p; ++i) a_in.set(i, tagged(r.rank, i));
          TypedBuffer original = a_in;
          TypedBuffer& target = place == kOutOfPlace ? a_out : a_in;
          input = place == kOutOfPlace    ? a_in.buffer()
                  : place == kSamePointer ? a_in.buffer()
                                          : absent();
          what = describe("alltoall", dt, n, place);
          r.expect_status(r.run(make_op(PG_OP_ALLTOALL, input, target.buffer()), &err), PG_OK,
                          what + " " + err);
          expect_values(
              r, target, 0, n * p, [&](size_t i) { return tagged(int(i / n), r.rank * n + i % n); },
              what);
          if (place == kOutOfPlace) r.expect(a_in.same_bytes(original), what + ": input changed");
        }
      }
    }
  });
}

TEST_P(GlooCollectives, GatherAndScatterEveryRoot) {
  run_world(GetParam(), {}, [](RankEnv& r) {
    const size_t p = r.size;
    for (pg_dtype_t dt : kMoveDtypes) {
      for (int root = 0; root < r.size; ++root) {
        for (size_t n : kCounts) {
          for (int place : {kOutOfPlace, kSamePointer}) {
            const bool is_root = r.rank == root;
            OpArgs a;
            a.root = root;
            // gather: block j of the root's output is rank j's input.
            TypedBuffer in(dt, n), out(dt, n * p);
            for (size_t i = 0; i < n; ++i) in.set(i, tagged(r.rank, i));
            for (size_t i = 0; i < n; ++i) out.set(r.rank * n + i, tagged(r.rank, i));
            pg_buffer_t input =
                is_root && place == kSamePointer ? out.buffer(r.rank * n, n) : in.buffer();
            std::string err;
            auto what = describe("gather", dt, n, place, root);
            r.expect_status(
                r.run(make_op(PG_OP_GATHER, input, is_root ? out.buffer() : absent(), a), &err),
                PG_OK, what + " " + err);
            if (is_root) {
              expect_values(
                  r, out, 0, n * p, [&](size_t i) { return tagged(int(i / n), i % n); }, what);
            }
            // scatter: block j of the root's input goes to rank j.
            TypedBuffer s_in(dt, n * p), s_out(dt, n);
            if (is_root) {
              for (size_t i = 0; i < n * p; ++i) s_in.set(i, tagged(50 + int(i / n), i % n));
            }
            const bool at_input = is_root && place == kSamePointer;
            pg_buffer_t output = at_input ? s_in.buffer(r.rank * n, n) : s_out.buffer();
            what = describe("scatter", dt, n, place, root);
            r.expect_status(
                r.run(make_op(PG_OP_SCATTER, is_root ? s_in.buffer() : absent(), output, a), &err),
                PG_OK, what + " " + err);
            expect_values(
                r, at_input ? s_in : s_out, at_input ? r.rank * n : 0, n,
                [&](size_t i) { return tagged(50 + r.rank, i); }, what);
          }
        }
      }
    }
  });
}

TEST_P(GlooCollectives, BarrierOrdersAroundAFileFlag) {
  // Rank 0 writes a flag only after a delay; no rank may leave the barrier before that.
  run_world(GetParam(), {}, [](RankEnv& r) {
    for (int round = 0; round < 3; ++round) {
      const std::string key = "flag" + std::to_string(round);
      if (r.rank == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        r.store->put(key, "set");
      }
      std::string err;
      r.expect_status(r.run(make_op(PG_OP_BARRIER, absent(), absent()), &err), PG_OK,
                      "barrier " + err);
      std::string value;
      r.expect(r.store->fetch(key, 0, &value), "left the barrier before rank 0 reached it");
    }
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSize, GlooCollectives, ::testing::Values(1, 2, 3, 4));

}  // namespace
}  // namespace procgroup::gloo_test
