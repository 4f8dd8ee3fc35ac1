// Every Store operation, run against each implementation: tcp (server + clients), file,
// memory, and a prefix view. open() gives another handle on the same data (another TCP
// client, another FileStore on the directory, the same memory store).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <thread>

#include "store/file_store.h"
#include "store/store.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"
#include "store_test_util.h"

namespace procgroup::detail {
namespace {

using store_testing::TempDir;
using store_testing::to_bytes;
using store_testing::to_text;
using ::testing::HasSubstr;

class TcpKind {
 public:
  TcpKind() {
    auto server = TcpStoreServer::start({.host = "127.0.0.1", .port = 0});
    if (server.ok()) server_ = std::move(server).value();
  }
  Result<std::shared_ptr<Store>> open() {
    if (!server_) return make_error(PG_ERR_STORE, "server did not start");
    PG_ASSIGN_OR_RETURN(
        auto client, TcpStoreClient::connect(
                         {.host = "127.0.0.1", .port = server_->port(), .timeout = Millis(5000)}));
    return std::shared_ptr<Store>(std::move(client));
  }

 private:
  std::unique_ptr<TcpStoreServer> server_;
};

class FileKind {
 public:
  Result<std::shared_ptr<Store>> open() {
    PG_ASSIGN_OR_RETURN(auto store, FileStore::open(dir_.path() + "/store", Millis(5000)));
    return std::shared_ptr<Store>(std::move(store));
  }

 private:
  TempDir dir_;
};

class MemoryKind {
 public:
  Result<std::shared_ptr<Store>> open() { return store_; }

 private:
  std::shared_ptr<Store> store_ = make_memory_store();
};

class PrefixKind {
 public:
  Result<std::shared_ptr<Store>> open() { return make_prefix_store(base_, "pg/world/"); }

 private:
  std::shared_ptr<Store> base_ = make_memory_store();
};

template <class Kind>
class StoreOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = open();
    ASSERT_NE(store_, nullptr);
  }
  std::shared_ptr<Store> open() {
    auto store = kind_.open();
    EXPECT_TRUE(store.ok()) << store.status().to_string();
    return store.ok() ? store.value() : nullptr;
  }
  Kind kind_;
  std::shared_ptr<Store> store_;
};

using Kinds = ::testing::Types<TcpKind, FileKind, MemoryKind, PrefixKind>;
class KindNames {
 public:
  template <class T>
  static std::string GetName(int) {
    if (std::is_same_v<T, TcpKind>) return "tcp";
    if (std::is_same_v<T, FileKind>) return "file";
    if (std::is_same_v<T, MemoryKind>) return "memory";
    return "prefix";
  }
};
TYPED_TEST_SUITE(StoreOpsTest, Kinds, KindNames);

std::string value_of(Store& store, std::string_view key) {
  auto v = store.get(key, Millis(2000));
  return v.ok() ? to_text(v.value()) : "<" + v.status().to_string() + ">";
}

TYPED_TEST(StoreOpsTest, SetThenGetReturnsTheLatestValue) {
  Store& s = *this->store_;
  ASSERT_TRUE(s.set("a", to_bytes("one")).ok());
  EXPECT_EQ(value_of(s, "a"), "one");
  ASSERT_TRUE(s.set("a", to_bytes("two")).ok());
  EXPECT_EQ(value_of(s, "a"), "two");
  Bytes binary = {0, 1, 2, 0xff, 0};
  ASSERT_TRUE(s.set("bin", binary).ok());
  auto v = s.get("bin", Millis(1000));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v.value(), binary);
  ASSERT_TRUE(s.set("empty", Bytes()).ok());
  auto e = s.get("empty", Millis(1000));
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_TRUE(e.value().empty());
}

TYPED_TEST(StoreOpsTest, AnotherHandleSeesTheSameData) {
  auto other = this->open();
  ASSERT_NE(other, nullptr);
  ASSERT_TRUE(this->store_->set("shared", to_bytes("x")).ok());
  EXPECT_EQ(value_of(*other, "shared"), "x");
  EXPECT_EQ(other->add("count", 2).value(), 2);
  EXPECT_EQ(this->store_->add("count", 3).value(), 5);
}

TYPED_TEST(StoreOpsTest, GetWaitsForALaterSetFromAnotherThread) {
  auto writer = this->open();
  ASSERT_NE(writer, nullptr);
  auto start = Clock::now();
  std::thread t([&] {
    std::this_thread::sleep_for(Millis(150));
    EXPECT_TRUE(writer->set("late", to_bytes("arrived")).ok());
  });
  auto v = this->store_->get("late", Millis(10000));
  t.join();
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(to_text(v.value()), "arrived");
  EXPECT_GE(Clock::now() - start, Millis(100));  // it waited for the set
}

TYPED_TEST(StoreOpsTest, GetOnASharedHandleDoesNotBlockSetsFromOtherThreads) {
  std::thread t([&] {
    std::this_thread::sleep_for(Millis(100));
    EXPECT_TRUE(this->store_->set("late", to_bytes("v")).ok());
  });
  auto start = Clock::now();
  auto v = this->store_->get("late", Millis(10000));
  t.join();
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(to_text(v.value()), "v");
  EXPECT_LT(Clock::now() - start, Millis(5000));
}

TYPED_TEST(StoreOpsTest, GetTimesOutNamingTheKey) {
  auto start = Clock::now();
  auto v = this->store_->get("never-set-key", Millis(150));
  auto elapsed = Clock::now() - start;
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), PG_ERR_TIMEOUT) << v.status().to_string();
  EXPECT_THAT(v.status().message(), HasSubstr("never-set-key"));
  EXPECT_GE(elapsed, Millis(140));
  EXPECT_LT(elapsed, Millis(5000));
}

TYPED_TEST(StoreOpsTest, AddCountsFromAbsentAndRejectsNonNumbers) {
  Store& s = *this->store_;
  EXPECT_EQ(s.add("c", 5).value(), 5);
  EXPECT_EQ(s.add("c", -7).value(), -2);
  EXPECT_EQ(s.add("c", 0).value(), -2);
  EXPECT_EQ(value_of(s, "c"), "-2");
  ASSERT_TRUE(s.set("word", to_bytes("twelve")).ok());
  auto bad = s.add("word", 1);
  EXPECT_EQ(bad.status().code(), PG_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(bad.status().message(), HasSubstr("word"));
  EXPECT_EQ(value_of(s, "word"), "twelve");  // unchanged
  ASSERT_TRUE(s.set("big", to_bytes("9223372036854775807")).ok());
  EXPECT_EQ(s.add("big", 1).status().code(), PG_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(s.set("set_number", to_bytes("40")).ok());
  EXPECT_EQ(s.add("set_number", 2).value(), 42);
}

TYPED_TEST(StoreOpsTest, CompareSetSemantics) {
  Store& s = *this->store_;
  // Absent key, empty expected: created.
  auto r = s.compare_set("k", {}, to_bytes("first"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(to_text(r.value()), "first");
  // Mismatch: unchanged, returns the current value.
  r = s.compare_set("k", to_bytes("other"), to_bytes("second"));
  EXPECT_EQ(to_text(r.value()), "first");
  EXPECT_EQ(value_of(s, "k"), "first");
  // Empty expected no longer matches an existing non-empty value.
  r = s.compare_set("k", {}, to_bytes("second"));
  EXPECT_EQ(to_text(r.value()), "first");
  // Match: swapped.
  r = s.compare_set("k", to_bytes("first"), to_bytes("second"));
  EXPECT_EQ(to_text(r.value()), "second");
  EXPECT_EQ(value_of(s, "k"), "second");
  // Absent key with a non-empty expected: nothing is created.
  r = s.compare_set("absent", to_bytes("x"), to_bytes("y"));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.value().empty());
  std::vector<std::string> keys = {"absent"};
  EXPECT_FALSE(s.check(keys).value());
}

TYPED_TEST(StoreOpsTest, RemoveReportsWhetherTheKeyExisted) {
  Store& s = *this->store_;
  ASSERT_TRUE(s.set("gone", to_bytes("v")).ok());
  EXPECT_TRUE(s.remove("gone").value());
  std::vector<std::string> keys = {"gone"};
  EXPECT_FALSE(s.check(keys).value());
  EXPECT_FALSE(s.remove("gone").value());
  EXPECT_EQ(s.get("gone", Millis(50)).status().code(), PG_ERR_TIMEOUT);
}

TYPED_TEST(StoreOpsTest, WaitAndCheckOnSeveralKeys) {
  Store& s = *this->store_;
  std::vector<std::string> keys = {"w1", "w2", "w3"};
  EXPECT_TRUE(s.check({}).value());
  EXPECT_TRUE(s.wait({}, Millis(10)).ok());
  EXPECT_FALSE(s.check(keys).value());
  ASSERT_TRUE(s.set("w1", to_bytes("1")).ok());
  EXPECT_FALSE(s.check(keys).value());
  Status timed_out = s.wait(keys, Millis(100));
  EXPECT_EQ(timed_out.code(), PG_ERR_TIMEOUT);
  EXPECT_THAT(timed_out.message(), HasSubstr("w2"));
  EXPECT_THAT(timed_out.message(), HasSubstr("w3"));
  auto writer = this->open();
  std::thread t([&] {
    std::this_thread::sleep_for(Millis(50));
    EXPECT_TRUE(writer->set("w2", to_bytes("2")).ok());
    std::this_thread::sleep_for(Millis(50));
    EXPECT_TRUE(writer->add("w3", 1).ok());
  });
  Status waited = s.wait(keys, Millis(10000));
  t.join();
  EXPECT_TRUE(waited.ok()) << waited.to_string();
  EXPECT_TRUE(s.check(keys).value());
}

TYPED_TEST(StoreOpsTest, RejectsBadKeysAndValues) {
  Store& s = *this->store_;
  EXPECT_EQ(s.set("", to_bytes("v")).code(), PG_ERR_INVALID_ARGUMENT);
  std::string long_key(kMaxKeyBytes + 1, 'k');
  Status too_long = s.set(long_key, to_bytes("v"));
  EXPECT_EQ(too_long.code(), PG_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(too_long.message(), HasSubstr("4097"));
  EXPECT_EQ(s.get(long_key, Millis(10)).status().code(), PG_ERR_INVALID_ARGUMENT);
  Bytes huge(kMaxValueBytes + 1, 'x');
  EXPECT_EQ(s.set("huge", huge).code(), PG_ERR_INVALID_ARGUMENT);
}

TYPED_TEST(StoreOpsTest, OddKeysAndLargeValuesRoundTrip) {
  Store& s = *this->store_;
  std::vector<std::string> keys = {"a/b/c",
                                   "../escape",
                                   "sp ace",
                                   std::string("nul\0key", 7),
                                   "\xc3\xa9t\xc3\xa9",
                                   std::string(kMaxKeyBytes - 16, 'k'),
                                   "%41",
                                   "A"};
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(s.set(keys[i], to_bytes(std::to_string(i))).ok()) << i;
  }
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(value_of(s, keys[i]), std::to_string(i));
  Bytes big(3 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7 + i / 4096);
  ASSERT_TRUE(s.set("big", big).ok());
  auto v = s.get("big", Millis(5000));
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_TRUE(v.value() == big);
}

TYPED_TEST(StoreOpsTest, ConcurrentAddFromManyThreadsIsAtomic) {
  constexpr int kThreads = 8;
  constexpr int kAdds = 100;
  std::vector<std::vector<int64_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    // Half the threads share the fixture's handle, half have their own.
    auto store = t % 2 == 0 ? this->store_ : this->open();
    threads.emplace_back([store, &seen, t] {
      for (int i = 0; i < kAdds; ++i) {
        auto v = store->add("counter", 1);
        if (v.ok()) seen[t].push_back(v.value());
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<int64_t> all;
  for (auto& s : seen) all.insert(all.end(), s.begin(), s.end());
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expected(kThreads * kAdds);
  std::iota(expected.begin(), expected.end(), 1);
  EXPECT_EQ(all, expected);  // every add saw a distinct intermediate total
  EXPECT_EQ(value_of(*this->store_, "counter"), std::to_string(kThreads * kAdds));
}

TEST(PrefixStoreTest, ViewsDoNotSeeEachOthersKeys) {
  auto base = make_memory_store();
  auto a = make_prefix_store(base, "pg/a/");
  auto b = make_prefix_store(base, "pg/b/");
  ASSERT_TRUE(a->set("key", to_bytes("from a")).ok());
  ASSERT_TRUE(b->set("key", to_bytes("from b")).ok());
  EXPECT_EQ(value_of(*a, "key"), "from a");
  EXPECT_EQ(value_of(*b, "key"), "from b");
  EXPECT_EQ(value_of(*base, "pg/a/key"), "from a");
  std::vector<std::string> only_a = {"only_a"};
  ASSERT_TRUE(a->set("only_a", to_bytes("1")).ok());
  EXPECT_TRUE(a->check(only_a).value());
  EXPECT_FALSE(b->check(only_a).value());
  EXPECT_EQ(b->wait(only_a, Millis(50)).code(), PG_ERR_TIMEOUT);
  EXPECT_EQ(a->add("n", 1).value(), 1);
  EXPECT_EQ(b->add("n", 1).value(), 1);
  EXPECT_TRUE(b->remove("key").value());
  EXPECT_EQ(value_of(*a, "key"), "from a");
  auto nested = make_prefix_store(a, "sub/");
  ASSERT_TRUE(nested->set("x", to_bytes("deep")).ok());
  EXPECT_EQ(value_of(*base, "pg/a/sub/x"), "deep");
  EXPECT_EQ(a->set("", to_bytes("v")).code(), PG_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace procgroup::detail
