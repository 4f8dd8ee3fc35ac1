// The pieces the algorithms stand on: the thread transport's matching rules (which every
// other test here relies on), wait_all, and IoBatch's waiting and error context.
#include "collectives/transport.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "collectives/collective_util.h"
#include "thread_transport.h"

namespace procgroup::detail::testing {
namespace {

using std::chrono::milliseconds;

class CountingRequest : public PendingIo {
 public:
  CountingRequest(int* waits, Status result) : waits_(waits), result_(std::move(result)) {}
  Status wait() override {
    ++*waits_;
    return result_;
  }

 private:
  int* waits_;
  Status result_;
};

TEST(ThreadTransport, SameKeyMatchesInPostingOrderWhateverTheWaitOrder) {
  ThreadWorld world(2, milliseconds(10000));
  ThreadTransport t0(world, 0), t1(world, 1);
  int a = 1, b = 2, c = 3, x = 0, y = 0, z = 0;
  auto r1 = t1.irecv(0, &x, sizeof x, 5);
  auto r2 = t1.irecv(0, &y, sizeof y, 5);
  auto r3 = t1.irecv(0, &z, sizeof z, 6);
  ASSERT_TRUE(r1.ok() && r2.ok() && r3.ok());
  ASSERT_TRUE(t0.isend(1, &c, sizeof c, 6).ok());  // other tag: its own queue
  ASSERT_TRUE(t0.isend(1, &a, sizeof a, 5).ok());
  ASSERT_TRUE(t0.isend(1, &b, sizeof b, 5).ok());
  a = b = c = 0;  // sends copied eagerly
  EXPECT_TRUE((*r2)->wait().ok());
  EXPECT_TRUE((*r3)->wait().ok());
  EXPECT_TRUE((*r1)->wait().ok());
  EXPECT_EQ(x, 1);
  EXPECT_EQ(y, 2);
  EXPECT_EQ(z, 3);
  EXPECT_EQ(world.unreceived_messages(), 0u);
}

TEST(ThreadTransport, SizeMismatchTimeoutAndBadPeer) {
  ThreadWorld world(2, milliseconds(100));
  ThreadTransport t0(world, 0), t1(world, 1);
  int v = 7;
  int64_t w = 0;
  ASSERT_TRUE(t0.isend(1, &v, sizeof v, 1).ok());
  auto r = t1.irecv(0, &w, sizeof w, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->wait().code(), PG_ERR_MISMATCH);
  auto never = t1.irecv(0, &v, sizeof v, 2);
  ASSERT_TRUE(never.ok());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ((*never)->wait().code(), PG_ERR_TIMEOUT);
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(100));
  EXPECT_EQ(t0.isend(2, &v, sizeof v, 1).status().code(), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(t0.irecv(0, &v, sizeof v, 1).status().code(), PG_ERR_INVALID_ARGUMENT);
}

TEST(WaitAll, WaitsForEveryRequestAndReturnsTheFirstFailure) {
  int waits = 0;
  std::vector<Request> requests;
  requests.push_back(std::make_unique<CountingRequest>(&waits, ok_status()));
  requests.push_back(std::make_unique<CountingRequest>(&waits, make_error(PG_ERR_PEER_LOST, "a")));
  requests.push_back(nullptr);
  requests.push_back(std::make_unique<CountingRequest>(&waits, make_error(PG_ERR_TIMEOUT, "b")));
  requests.push_back(std::make_unique<CountingRequest>(&waits, ok_status()));
  const Status s = wait_all(requests);
  EXPECT_EQ(s.code(), PG_ERR_PEER_LOST);
  EXPECT_EQ(s.message(), "a");
  EXPECT_EQ(waits, 4);
  EXPECT_TRUE(requests.empty());
  EXPECT_TRUE(wait_all(requests).ok());
}

// A transport whose second call fails to post; the first is a receive that must still be
// waited for.
class PostFailsTransport : public Transport {
 public:
  int rank() const override { return 0; }
  int size() const override { return 3; }
  Result<Request> isend(int, const void*, size_t, uint64_t) override { return post(); }
  Result<Request> irecv(int, void*, size_t, uint64_t) override { return post(); }
  int posted = 0;
  int waits = 0;

 private:
  Result<Request> post() {
    if (posted++ == 1) return make_error(PG_ERR_PEER_LOST, "connection reset");
    return Request(std::make_unique<CountingRequest>(&waits, ok_status()));
  }
};

TEST(IoBatch, PostFailureStopsPostingWaitsForPostedAndNamesTheStep) {
  PostFailsTransport t;
  char buf[4] = {};
  IoBatch io(t);
  io.recv(2, buf, 0, 0);  // zero bytes: skipped, not posted
  io.recv(2, buf, 4, 0);
  io.send(1, buf, 4, 0);  // fails
  io.send(2, buf, 4, 0);  // not posted after the failure
  const Status s = io.wait("allgather (ring)", 3);
  EXPECT_EQ(t.posted, 2);
  EXPECT_EQ(t.waits, 1);
  EXPECT_EQ(s.code(), PG_ERR_PEER_LOST);
  EXPECT_EQ(s.message(), "allgather (ring) step 3, sending to rank 1: connection reset");
}

}  // namespace
}  // namespace procgroup::detail::testing
