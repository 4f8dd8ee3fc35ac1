// The backend kit's store.hpp and work.hpp: kit::Store over a fake host store (values as
// strings, the host's memory given back, failures naming the call and the key), and
// kit::Completion (one outcome, waits bounded by a deadline, the completion notice) and
// kit::wait_until.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "procgroup/procgroup_backend_kit.hpp"

namespace procgroup::kit {
namespace {

// A map in memory; `failing` makes every call fail with that status.
struct FakeStore {
  std::map<std::string, std::string> values;
  pg_status_t failing = PG_OK;
  int freed = 0;
  pg_host_store_t table = make_table();

  pg_host_store_t make_table() {
    pg_host_store_t t{};
    t.struct_size = sizeof(t);
    t.ctx = this;
    t.set = [](void* ctx, const char* key, const void* value, uint64_t length) -> pg_status_t {
      auto* s = static_cast<FakeStore*>(ctx);
      if (s->failing != PG_OK) return s->failing;
      s->values[key].assign(static_cast<const char*>(value), length);
      return PG_OK;
    };
    t.get = [](void* ctx, const char* key, int64_t, void** value, uint64_t* length) -> pg_status_t {
      auto* s = static_cast<FakeStore*>(ctx);
      if (s->failing != PG_OK) return s->failing;
      auto it = s->values.find(key);
      if (it == s->values.end()) return PG_ERR_TIMEOUT;
      *value = std::malloc(it->second.size() + 1);
      std::memcpy(*value, it->second.data(), it->second.size());
      *length = it->second.size();
      return PG_OK;
    };
    t.free_value = [](void* ctx, void* value) {
      ++static_cast<FakeStore*>(ctx)->freed;
      std::free(value);
    };
    return t;  // no add, no remove
  }
};

TEST(KitStore, SetsAndGetsStringsAndGivesTheHostsMemoryBack) {
  FakeStore fake;
  const Store store(&fake.table);
  ASSERT_TRUE(store.set("a", std::string("x\0y", 3)).ok());
  std::string value;
  ASSERT_TRUE(store.get("a", 100, &value).ok());
  EXPECT_EQ(value, std::string("x\0y", 3));
  EXPECT_EQ(fake.freed, 1);
  bool found = true;
  EXPECT_TRUE(store.exists("b", &found).ok());
  EXPECT_FALSE(found);
  EXPECT_EQ(store.remove("a"), PG_ERR_UNSUPPORTED);  // a store without remove
}

TEST(KitStore, FailuresKeepTheHostsCodeAndNameTheKey) {
  FakeStore fake;
  const Store store(&fake.table);
  std::string value = "kept";
  Status st = store.get("missing", 250, &value);
  EXPECT_EQ(st.code, PG_ERR_TIMEOUT);
  EXPECT_EQ(st.message, "store get of 'missing' (waiting up to 250 ms) failed: timed out");
  EXPECT_EQ(value, "kept");
  fake.failing = PG_ERR_AUTH;
  st = store.set("k", "v");
  EXPECT_EQ(st.code, PG_ERR_AUTH);
  EXPECT_EQ(st.message, "store set of 'k' failed: store authentication failed");
  bool found = false;
  EXPECT_EQ(store.exists("k", &found).code, PG_ERR_AUTH);  // not mistaken for absence
}

TEST(KitCompletion, CompletesOnceAndReportsTheFirstOutcome) {
  Completion done;
  std::string message;
  EXPECT_EQ(done.test(&message), PG_PENDING);
  EXPECT_EQ(done.wait_until(deadline_after(1), &message), PG_PENDING);
  EXPECT_TRUE(done.complete(PG_ERR_PEER_LOST, "rank 1 is gone"));
  EXPECT_FALSE(done.complete(Status{}));
  EXPECT_EQ(done.wait_until(kNever, &message), PG_ERR_PEER_LOST);
  EXPECT_EQ(message, "rank 1 is gone");
}

TEST(KitCompletion, WakesAWaiterAndCallsTheNoticeOnce) {
  Completion done;
  int notices = 0;
  auto notice = [](void* user) { ++*static_cast<int*>(user); };
  EXPECT_TRUE(done.notify_on_complete(notice, &notices));
  EXPECT_FALSE(done.notify_on_complete(notice, &notices));  // asked for already
  std::thread finisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    done.complete(PG_OK);
  });
  std::string message;
  EXPECT_EQ(done.wait_until(kNever, &message), PG_OK);
  finisher.join();
  EXPECT_EQ(notices, 1);
  Completion already;
  already.complete(PG_OK);
  EXPECT_TRUE(already.notify_on_complete(notice, &notices));  // called at once
  EXPECT_EQ(notices, 2);
}

TEST(KitCompletion, WaitTakesATimeoutOrWaitsUntilItsBound) {
  Completion done;
  std::string message;
  EXPECT_EQ(done.wait(0, &message), PG_PENDING);
  const Clock::time_point start = Clock::now();
  const auto bound = std::chrono::milliseconds(20);
  EXPECT_EQ(done.wait(-1, &message, start + bound), PG_PENDING);  // < 0: until the bound
  EXPECT_GE(Clock::now() - start, bound);
  std::thread finisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    done.complete(PG_ERR_TIMEOUT, "too late");
  });
  EXPECT_EQ(done.wait(-1, &message), PG_ERR_TIMEOUT);  // no bound: until it completes
  finisher.join();
  EXPECT_EQ(message, "too late");
  EXPECT_EQ(done.wait(1000, &message), PG_ERR_TIMEOUT);  // completed: at once
}

TEST(KitWaitUntil, ReturnsThePredicateAtTheDeadlineOrWaitsWithoutOne) {
  std::mutex mu;
  std::condition_variable cv;
  bool ready = false;
  std::unique_lock lock(mu);
  EXPECT_FALSE(wait_until(cv, lock, deadline_after(5), [&] { return ready; }));  // timed out
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::lock_guard guard(mu);
    ready = true;
    cv.notify_all();
  });
  EXPECT_TRUE(wait_until(cv, lock, kNever, [&] { return ready; }));  // no bound
  lock.unlock();
  setter.join();
}

TEST(KitCompletion, DeadlineAfterSaturates) {
  EXPECT_EQ(deadline_after(int64_t{1} << 62), kNever);
  const Clock::time_point before = Clock::now();
  const Clock::time_point now = deadline_after(-5);  // a negative wait is none
  EXPECT_TRUE(before <= now && now <= Clock::now());
}

// The coarse clock is the steady clock as of its last tick: never ahead of it, behind by a
// tick and the tick's lateness (4.6 ms seen with 4 ms ticks; two ticks is the bound relied
// on); a lazy deadline is not earlier than the exact one, at most three ticks later.
TEST(KitClock, CoarseNowTrailsTheClockByAtMostATick) {
  const Clock::duration tick = coarse_tick();
  ASSERT_GT(tick, Clock::duration(0));
  ASSERT_LE(tick, std::chrono::milliseconds(100));  // a sane resolution, or none at all
  for (int i = 0; i < 1000; ++i) {
    const Clock::time_point before = Clock::now();
    const Clock::time_point coarse = coarse_now();
    const Clock::time_point after = Clock::now();
    EXPECT_LE(coarse, after);
    EXPECT_GE(coarse + 2 * tick, before) << "the coarse clock lags by more than two ticks";
  }
}

TEST(KitClock, LazyDeadlineIsNeverEarlyAndSaturates) {
  EXPECT_EQ(lazy_deadline_after(int64_t{1} << 62), kNever);
  for (int64_t ms : {int64_t{-5}, int64_t{0}, int64_t{1}, int64_t{250}}) {
    const Clock::time_point exact_before = deadline_after(ms);
    const Clock::time_point lazy = lazy_deadline_after(ms);
    const Clock::time_point exact_after = deadline_after(ms);
    EXPECT_GE(lazy, exact_before) << ms << " ms";
    EXPECT_LE(lazy, exact_after + 3 * coarse_tick()) << ms << " ms";
  }
}

}  // namespace
}  // namespace procgroup::kit
