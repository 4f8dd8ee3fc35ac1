// pg_group_create_with_store: groups that rendezvous through a store the caller provides
// (what integrations/torch does with torch's c10d::Store), with thread ranks on loopback.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "procgroup/procgroup.h"

namespace {

// The caller's store: a map under a mutex; get waits for the key.
class MapStore {
 public:
  MapStore() {
    c_ = PG_STORE_INIT;
    c_.ctx = this;
    c_.set = [](void* ctx, const char* key, const void* value, uint64_t length) {
      auto* s = static_cast<MapStore*>(ctx);
      std::lock_guard lock(s->mutex_);
      if (s->failing_) return pg_status_t{PG_ERR_STORE};
      const auto* bytes = static_cast<const char*>(value);
      s->data_[key] = std::string(bytes, bytes + length);
      s->ever_set_.push_back(key);
      s->changed_.notify_all();
      return pg_status_t{PG_OK};
    };
    c_.get = [](void* ctx, const char* key, int64_t timeout_ms, void** value, uint64_t* length) {
      auto* s = static_cast<MapStore*>(ctx);
      std::unique_lock lock(s->mutex_);
      if (s->failing_) return pg_status_t{PG_ERR_STORE};
      if (!s->changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                                [&] { return s->data_.count(key) > 0; }))
        return pg_status_t{PG_ERR_TIMEOUT};
      const std::string& v = s->data_[key];
      *value = std::malloc(v.size() + 1);
      std::memcpy(*value, v.data(), v.size());
      *length = v.size();
      return pg_status_t{PG_OK};
    };
    c_.free_value = [](void*, void* value) { std::free(value); };
    c_.add = [](void* ctx, const char* key, int64_t delta, int64_t* result) {
      auto* s = static_cast<MapStore*>(ctx);
      std::lock_guard lock(s->mutex_);
      if (s->failing_) return pg_status_t{PG_ERR_STORE};
      std::string& v = s->data_[key];
      *result = (v.empty() ? 0 : std::stoll(v)) + delta;
      v = std::to_string(*result);
      s->changed_.notify_all();
      return pg_status_t{PG_OK};
    };
    c_.check = [](void* ctx, const char* key, int32_t* exists) {
      auto* s = static_cast<MapStore*>(ctx);
      std::lock_guard lock(s->mutex_);
      *exists = s->data_.count(key) > 0 ? 1 : 0;
      return pg_status_t{PG_OK};
    };
    c_.remove = [](void* ctx, const char* key) {
      auto* s = static_cast<MapStore*>(ctx);
      std::lock_guard lock(s->mutex_);
      s->data_.erase(key);
      return pg_status_t{PG_OK};
    };
    c_.error_message = [](void* ctx) -> const char* {
      return static_cast<MapStore*>(ctx)->failing_ ? "the job service is down" : "";
    };
  }
  const pg_store_t* c_store() const { return &c_; }
  void fail() { failing_ = true; }
  // Every key ever set (plugins remove their rendezvous keys once used).
  std::vector<std::string> keys() {
    std::lock_guard lock(mutex_);
    return ever_set_;
  }

 private:
  pg_store_t c_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> data_;
  std::vector<std::string> ever_set_;
  std::atomic<bool> failing_ = false;
};

pg_group_options_t rank_options(int rank, int size, int64_t timeout_ms = 30000) {
  pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
  o.rank = rank;
  o.size = size;
  o.backend = "loopback";
  o.timeout_ms = timeout_ms;
  return o;
}

TEST(UserStore, GroupsRendezvousThroughTheCallersStore) {
  MapStore store;
  constexpr int kSize = 3;
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < kSize; ++rank) {
    ranks.emplace_back([&, rank] {
      pg_group_options_t o = rank_options(rank, kSize);
      o.name = "mine";
      pg_group_t g = nullptr;
      ASSERT_EQ(pg_group_create_with_store(&o, store.c_store(), &g), PG_OK) << pg_last_error();
      float x[3] = {1.0f * rank, 2, 3};
      pg_buffer_t b = pg_buffer_cpu(x, 3, PG_DTYPE_F32);
      ASSERT_EQ(pg_allreduce(g, nullptr, &b, nullptr, nullptr), PG_OK) << pg_last_error();
      EXPECT_EQ(x[0], 0 + 1 + 2);
      EXPECT_EQ(x[2], 9);
      // A subgroup inherits the store.
      pg_group_t sub = nullptr;
      ASSERT_EQ(pg_group_split(g, rank % 2, rank, &sub), PG_OK) << pg_last_error();
      int32_t one = 1;
      pg_buffer_t ob = pg_buffer_cpu(&one, 1, PG_DTYPE_I32);
      ASSERT_EQ(pg_allreduce(sub, nullptr, &ob, nullptr, nullptr), PG_OK) << pg_last_error();
      EXPECT_EQ(one, rank % 2 == 0 ? 2 : 1);
      EXPECT_EQ(pg_group_destroy(sub), PG_OK);
      EXPECT_EQ(pg_group_destroy(g), PG_OK);
    });
  }
  for (auto& t : ranks) t.join();
  // Every key procgroup wrote is its own ("pg/<group>/..."), so it shares the store safely.
  std::vector<std::string> keys = store.keys();
  ASSERT_FALSE(keys.empty());
  for (const std::string& key : keys) EXPECT_EQ(key.rfind("pg/mine", 0), 0u) << key;
}

TEST(UserStore, BadStoresAreRefusedByName) {
  MapStore good;
  pg_group_options_t o = rank_options(0, 1);
  pg_group_t g = nullptr;
  EXPECT_EQ(pg_group_create_with_store(&o, nullptr, &g), PG_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pg_last_error()).find("store is NULL"), std::string::npos)
      << pg_last_error();

  pg_store_t no_add = *good.c_store();
  no_add.add = nullptr;
  EXPECT_EQ(pg_group_create_with_store(&o, &no_add, &g), PG_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(pg_last_error(), "pg_store_t: the 'add' callback is NULL");

  pg_store_t small = *good.c_store();
  small.struct_size = 8;
  EXPECT_EQ(pg_group_create_with_store(&o, &small, &g), PG_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pg_last_error()).find("PG_STORE_INIT"), std::string::npos)
      << pg_last_error();

  o.store_url = "tcp://127.0.0.1:1";
  EXPECT_EQ(pg_group_create_with_store(&o, good.c_store(), &g), PG_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pg_last_error()).find("store_url"), std::string::npos)
      << pg_last_error();
  EXPECT_EQ(g, nullptr);
}

TEST(UserStore, TheStoresOwnWordsReachTheCaller) {
  MapStore store;
  store.fail();
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      pg_group_options_t o = rank_options(rank, 2, 2000);
      pg_group_t g = nullptr;
      EXPECT_EQ(pg_group_create_with_store(&o, store.c_store(), &g), PG_ERR_STORE)
          << pg_last_error();
      EXPECT_NE(std::string(pg_last_error()).find("the job service is down"), std::string::npos)
          << pg_last_error();
    });
  }
  for (auto& t : ranks) t.join();
}

TEST(UserStore, AHangIsReportedThroughTheCallersStore) {
  MapStore store;
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      pg_group_options_t o = rank_options(rank, 2, 1000);
      pg_group_t g = nullptr;
      ASSERT_EQ(pg_group_create_with_store(&o, store.c_store(), &g), PG_OK) << pg_last_error();
      float x = 1;
      pg_buffer_t b = pg_buffer_cpu(&x, 1, PG_DTYPE_F32);
      if (rank == 0) {
        EXPECT_EQ(pg_allreduce(g, nullptr, &b, nullptr, nullptr), PG_ERR_TIMEOUT);
        // Rank 1 never reported: the report read the caller's store to learn so.
        EXPECT_NE(std::string(pg_last_error()).find("rank 1"), std::string::npos)
            << pg_last_error();
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(2500));
      }
      pg_group_destroy(g);
    });
  }
  for (auto& t : ranks) t.join();
  bool reported = false;
  for (const std::string& key : store.keys()) reported |= key.find("hang") != std::string::npos;
  EXPECT_TRUE(reported) << "no hang-report key in the caller's store";
}

}  // namespace
