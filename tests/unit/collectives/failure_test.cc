// Transport failures: an error injected at a chosen send/receive of one rank is returned by
// that rank with the algorithm and step named, and the other ranks end (successfully, or
// with PG_ERR_TIMEOUT from the transport's deadline) instead of hanging.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/collective_util.h"
#include "harness.h"

namespace procgroup::detail::testing {
namespace {

// Short, so that peers of a failed rank give up quickly.
constexpr std::chrono::milliseconds kFailTimeout{500};

struct Op {
  const char* name;
  Status (*fn)(Transport&, const CollectiveArgs&);
  uint64_t count;          // per rank
  uint64_t buffer_blocks;  // buffer size in units of count: 1 or size
};

class FailureTest : public ::testing::TestWithParam<Op> {};

// Runs the op on `size` ranks with rank `failing` wrapped in a FaultyTransport that fails
// its call `fail_at`; returns every rank's status. calls_out receives the failing rank's
// number of calls (the total, when fail_at is beyond them).
std::vector<Status> run_op(const Op& op, int size, int root, int failing, int fail_at, bool in_wait,
                           int* calls_out) {
  const size_t elems = op.count * (op.buffer_blocks == 1 ? 1 : static_cast<uint64_t>(size));
  std::vector<std::vector<float>> in(static_cast<size_t>(size), std::vector<float>(elems, 1.0f));
  std::vector<std::vector<float>> out(static_cast<size_t>(size), std::vector<float>(elems));
  ThreadWorld world(size, kFailTimeout);
  FaultyTransport* faulty = nullptr;
  auto results = world.run_wrapped(
      [&](int rank, Transport& inner) -> std::unique_ptr<Transport> {
        if (rank != failing) return nullptr;
        auto f = std::make_unique<FaultyTransport>(inner, fail_at, in_wait, PG_ERR_PEER_LOST);
        faulty = f.get();
        return f;
      },
      [&](Transport& t) {
        CollectiveArgs a;
        a.input = in[static_cast<size_t>(t.rank())].data();
        a.output = out[static_cast<size_t>(t.rank())].data();
        a.count = op.count;
        a.dtype = PG_DTYPE_F32;
        a.reduce_op = PG_REDUCE_AVG;
        a.root = root;
        Status s = op.fn(t, a);
        if (t.rank() == failing) *calls_out = faulty->calls();
        return s;
      });
  return results;
}

TEST_P(FailureTest, InjectedErrorIsReturnedAndPeersDoNotHang) {
  const Op& op = GetParam();
  for (int size : {3, 4}) {
    // Size 3: the root fails; size 4: a non-root (the last rank) fails.
    const int root = size == 3 ? 1 : 0;
    const int failing = size == 3 ? 1 : 3;
    int calls = 0;
    // A clean run first: it succeeds everywhere and tells how many calls the rank makes.
    for (const Status& s : run_op(op, size, root, failing, 1 << 30, false, &calls)) {
      ASSERT_TRUE(s.ok()) << op.name << ": " << s.to_string();
    }
    ASSERT_GT(calls, 0) << op.name << " size " << size << ": rank " << failing << " sends nothing";
    for (int fail_at : {0, calls - 1}) {
      for (bool in_wait : {false, true}) {
        const std::string what =
            fmt::format("{} size {} rank {} failing call {} of {} {}", op.name, size, failing,
                        fail_at, calls, in_wait ? "in wait" : "when posted");
        const auto start = std::chrono::steady_clock::now();
        int ignored = 0;
        const std::vector<Status> results =
            run_op(op, size, root, failing, fail_at, in_wait, &ignored);
        const auto elapsed = std::chrono::steady_clock::now() - start;
        for (int r = 0; r < size; ++r) {
          const Status& s = results[static_cast<size_t>(r)];
          if (r == failing) {
            EXPECT_EQ(s.code(), PG_ERR_PEER_LOST) << what << ": " << s.to_string();
            EXPECT_NE(s.message().find("injected"), std::string::npos)
                << what << ": " << s.message();
            EXPECT_NE(s.message().find(op.name), std::string::npos) << what << ": " << s.message();
            EXPECT_NE(s.message().find(" step "), std::string::npos) << what << ": " << s.message();
          } else {
            EXPECT_TRUE(s.ok() || s.code() == PG_ERR_TIMEOUT)
                << what << ", rank " << r << ": " << s.to_string();
            if (!s.ok()) {
              EXPECT_NE(s.message().find(op.name), std::string::npos)
                  << what << ": " << s.message();
            }
          }
        }
        // Each rank waits out at most a few deadlines, never indefinitely.
        EXPECT_LT(elapsed, 20 * kFailTimeout) << what;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Collectives, FailureTest,
    ::testing::Values(Op{"allreduce", &fallback_allreduce, 7, 1},
                      Op{"allreduce", &fallback_allreduce, kAllreduceSmallBytes / 4 + 1, 1},
                      Op{"broadcast", &fallback_broadcast, 7, 1},
                      Op{"reduce", &fallback_reduce, 7, 1},
                      Op{"allgather", &fallback_allgather, 7, 0},
                      Op{"reduce_scatter", &fallback_reduce_scatter, 7, 0},
                      Op{"gather", &fallback_gather, 7, 0}, Op{"scatter", &fallback_scatter, 7, 0},
                      Op{"alltoall", &fallback_alltoall, 7, 0},
                      Op{"barrier", &fallback_barrier, 0, 1}),
    [](const auto& param) {
      return std::string(param.param.name) + (param.param.count > 1000 ? "_ring" : "");
    });

// Ranks that disagree on the count: the transport reports the size mismatch on a receiving
// rank, which returns it; nobody hangs.
TEST(FailureMismatch, DisagreeingCountsAreReportedNotHung) {
  ThreadWorld world(4, kFailTimeout);
  std::vector<std::vector<float>> bufs(4, std::vector<float>(9, 1.0f));
  const std::vector<Status> results = world.run([&](Transport& t) {
    CollectiveArgs a;
    a.output = bufs[static_cast<size_t>(t.rank())].data();
    a.count = t.rank() == 2 ? 9 : 8;
    a.dtype = PG_DTYPE_F32;
    return fallback_allreduce(t, a);
  });
  int mismatches = 0;
  for (const Status& s : results) {
    EXPECT_TRUE(s.code() == PG_ERR_MISMATCH || s.code() == PG_ERR_TIMEOUT) << s.to_string();
    mismatches += s.code() == PG_ERR_MISMATCH ? 1 : 0;
  }
  EXPECT_GE(mismatches, 1);
}

}  // namespace
}  // namespace procgroup::detail::testing
