// The c10d store client against a REAL torch TCPStore server (torch_store_server.py): every
// operation, timeouts, what torch sees of our keys and we of torch's, and a server that
// goes away. Skips, saying why, where TORCH_PYTHON has no torch.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "c10d_test_servers.h"
#include "store/c10d_store_client.h"
#include "store/open_store.h"
#include "store_test_util.h"

namespace procgroup::detail {
namespace {

using store_testing::to_bytes;
using store_testing::to_text;
using store_testing::TorchStoreServer;
using ::testing::HasSubstr;

constexpr char kPrefix[] = "procgroup/attempt_0";

class C10dTorchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!TorchStoreServer::unavailable().empty()) GTEST_SKIP() << TorchStoreServer::unavailable();
    torch_ = std::make_unique<TorchStoreServer>();
    ASSERT_NE(torch_->port(), 0) << torch_->error();
    where_ = "127.0.0.1:" + std::to_string(torch_->port());
  }

  std::unique_ptr<C10dStoreClient> connect(Millis timeout = Millis(10000),
                                           const std::string& prefix = kPrefix) {
    C10dStoreClientOptions options;
    options.host = "127.0.0.1";
    options.port = torch_->port();
    options.key_prefix = prefix + "/";
    options.timeout = timeout;
    auto client = C10dStoreClient::connect(options);
    EXPECT_TRUE(client.ok()) << client.status().to_string();
    return client.ok() ? std::move(client).value() : nullptr;
  }

  // What torch's own client sees through PrefixStore(prefix).
  std::string torch_op(const std::string& op, const std::string& key, const std::string& more = "",
                       const std::string& prefix = kPrefix) {
    return torch_->command(R"({"op": ")" + op + R"(", "prefix": ")" + prefix + R"(", "key": ")" +
                           key + "\"" + more + "}");
  }

  std::unique_ptr<TorchStoreServer> torch_;
  std::string where_;
};

TEST_F(C10dTorchTest, DetectsTheProtocolOfTheInstalledTorch) {
  auto store = connect();
  ASSERT_NE(store, nullptr);
  int major = 0, minor = 0;
  ASSERT_EQ(std::sscanf(torch_->version().c_str(), "%d.%d", &major, &minor), 2);
  bool validated = major > 2 || (major == 2 && minor >= 3);
  EXPECT_EQ(store->protocol(), validated ? C10dStoreClient::Protocol::kValidated
                                         : C10dStoreClient::Protocol::kLegacy)
      << "torch " << torch_->version();
  EXPECT_THAT(store->description(), HasSubstr(where_));
}

TEST_F(C10dTorchTest, EveryOperation) {
  auto store = connect();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->set("k", to_bytes("v1")).ok());
  EXPECT_EQ(to_text(store->get("k", Millis(5000)).value()), "v1");
  ASSERT_TRUE(store->set("k", to_bytes("")).ok());  // empty values exist
  EXPECT_EQ(to_text(store->get("k", Millis(5000)).value()), "");

  EXPECT_EQ(store->add("n", 5).value(), 5);
  EXPECT_EQ(store->add("n", -7).value(), -2);
  EXPECT_EQ(to_text(store->get("n", Millis(5000)).value()), "-2");

  // compare_set with our stores' semantics: an empty expected matches an absent key, and an
  // absent key with another expected answers empty (torch alone would answer expected).
  EXPECT_EQ(to_text(store->compare_set("c", to_bytes(""), to_bytes("a")).value()), "a");
  EXPECT_EQ(to_text(store->compare_set("c", to_bytes("a"), to_bytes("b")).value()), "b");
  EXPECT_EQ(to_text(store->compare_set("c", to_bytes("x"), to_bytes("y")).value()), "b");
  EXPECT_EQ(to_text(store->compare_set("absent", to_bytes("x"), to_bytes("y")).value()), "");
  EXPECT_EQ(to_text(store->compare_set("absent", to_bytes("x"), to_bytes("x")).value()), "");
  EXPECT_EQ(to_text(store->compare_set("c", to_bytes("b"), to_bytes("b")).value()), "b");
  std::vector<std::string> absent{"absent"};
  EXPECT_FALSE(store->check(absent).value());

  std::vector<std::string> both{"k", "n"};
  EXPECT_TRUE(store->check(both).value());
  EXPECT_TRUE(store->wait(both, Millis(5000)).ok());
  EXPECT_TRUE(store->remove("k").value());
  EXPECT_FALSE(store->remove("k").value());
  EXPECT_FALSE(store->check(both).value());
  EXPECT_TRUE(store->check(std::vector<std::string>{}).value());
}

TEST_F(C10dTorchTest, GetTimesOutNamingTheKeyAndTheStoreStillWorks) {
  auto store = connect();
  ASSERT_NE(store, nullptr);
  auto start = std::chrono::steady_clock::now();
  auto got = store->get("never", Millis(300));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), PG_ERR_TIMEOUT);
  EXPECT_THAT(got.status().message(), HasSubstr("'never'"));
  EXPECT_THAT(got.status().message(), HasSubstr(where_));
  EXPECT_GE(seconds, 0.29);
  EXPECT_LT(seconds, 5.0);
  std::vector<std::string> keys{"never", "nor-this"};
  Status waited = store->wait(keys, Millis(200));
  EXPECT_EQ(waited.code(), PG_ERR_TIMEOUT);
  EXPECT_THAT(waited.message(), HasSubstr("'nor-this'"));
  // The server dropped the abandoned WAITs with their connections: setting the keys now
  // sends no stray byte to anyone, and later replies stay in step.
  ASSERT_TRUE(store->set("never", to_bytes("now")).ok());
  ASSERT_TRUE(store->set("nor-this", to_bytes("too")).ok());
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(store->add("count", 1).value(), i + 1);
    EXPECT_EQ(to_text(store->get("never", Millis(5000)).value()), "now");
  }
}

TEST_F(C10dTorchTest, GetWaitsForALaterSet) {
  auto store = connect();
  ASSERT_NE(store, nullptr);
  std::thread late([&] {
    std::this_thread::sleep_for(Millis(300));
    EXPECT_EQ(torch_op("set", "late", R"(, "value": "here")"), R"({"ok": true})");
  });
  auto got = store->get("late", Millis(20000));
  late.join();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(to_text(*got), "here");
}

TEST_F(C10dTorchTest, TorchAndWeSeeTheSameKeysUnderThePrefix) {
  auto store = connect();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->set("ours", to_bytes("from procgroup")).ok());
  EXPECT_EQ(torch_op("get", "ours"), R"({"ok": true, "value": "from procgroup"})");
  EXPECT_EQ(torch_op("set", "theirs", R"(, "value": "from torch")"), R"({"ok": true})");
  EXPECT_EQ(to_text(store->get("theirs", Millis(5000)).value()), "from torch");

  EXPECT_EQ(store->add("counter", 2).value(), 2);
  EXPECT_EQ(torch_op("add", "counter", R"(, "delta": 3)"), R"({"ok": true, "value": 5})");
  EXPECT_EQ(store->add("counter", 1).value(), 6);

  // torch's own workers use /worker/attempt_0: never our keys.
  EXPECT_EQ(torch_op("set", "ours", R"(, "value": "torch's")", "/worker/attempt_0"),
            R"({"ok": true})");
  EXPECT_EQ(to_text(store->get("ours", Millis(5000)).value()), "from procgroup");

  // A restarted job (TORCHELASTIC_RESTART_COUNT=1) sees nothing of attempt 0.
  auto restarted = connect(Millis(10000), "procgroup/attempt_1");
  ASSERT_NE(restarted, nullptr);
  EXPECT_FALSE(restarted->check(std::vector<std::string>{"ours"}).value());
  EXPECT_FALSE(restarted->check(std::vector<std::string>{"theirs"}).value());
}

TEST_F(C10dTorchTest, AddToANonNumberIsAStoreErrorAndTheStoreStillWorks) {
  auto store = connect();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->set("text", to_bytes("abc")).ok());
  auto added = store->add("text", 1);
  ASSERT_FALSE(added.ok());
  EXPECT_EQ(added.status().code(), PG_ERR_STORE);
  EXPECT_THAT(added.status().message(), HasSubstr("'text'"));
  EXPECT_THAT(added.status().message(), HasSubstr("not a decimal integer"));
  EXPECT_EQ(store->add("number", 1).value(), 1);
}

TEST_F(C10dTorchTest, ThreadsShareThePool) {
  auto store = connect();
  ASSERT_NE(store, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) EXPECT_TRUE(store->add("total", 1).ok());
      EXPECT_TRUE(store->set("t" + std::to_string(t), to_bytes("done")).ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(store->add("total", 0).value(), 100);
  std::vector<std::string> done{"t0", "t1", "t2", "t3"};
  EXPECT_TRUE(store->wait(done, Millis(5000)).ok());
}

TEST_F(C10dTorchTest, AStoppedServerIsAStoreErrorNamingHostAndPort) {
  auto store = connect();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->set("k", to_bytes("v")).ok());
  torch_->stop();
  Status after = store->set("k", to_bytes("w"));
  EXPECT_EQ(after.code(), PG_ERR_STORE);
  EXPECT_THAT(after.message(), HasSubstr(where_));

  C10dStoreClientOptions options;
  options.host = "127.0.0.1";
  options.port = torch_->port();
  options.timeout = Millis(300);
  auto again = C10dStoreClient::connect(options);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), PG_ERR_STORE);
  EXPECT_THAT(again.status().message(), HasSubstr("cannot connect to torch's c10d TCPStore at " +
                                                  where_ + " within 300 ms"));
  EXPECT_THAT(again.status().message(), HasSubstr("refused"));
}

TEST_F(C10dTorchTest, OpenStoreJoinsTheAgentStoreFromEveryRank) {
  std::string url = "c10d://" + where_ + "/" + kPrefix + "/?agent";
  std::vector<std::shared_ptr<Store>> ranks;
  for (int rank = 0; rank < 2; ++rank) {  // rank 0 starts no server: the port is torch's
    auto store = open_store({url, rank, 2, "", Millis(10000)});
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    ranks.push_back(*store);
  }
  ASSERT_TRUE(ranks[1]->set("from-1", to_bytes("hi")).ok());
  EXPECT_EQ(to_text(ranks[0]->get("from-1", Millis(5000)).value()), "hi");
  EXPECT_EQ(torch_op("get", "from-1"), R"({"ok": true, "value": "hi"})");

  auto with_token = open_store({url, 1, 2, "secret", Millis(1000)});
  ASSERT_FALSE(with_token.ok());
  EXPECT_EQ(with_token.status().code(), PG_ERR_CONFIG);
  EXPECT_THAT(with_token.status().message(),
              HasSubstr("torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE=True) at " + where_));
}

}  // namespace
}  // namespace procgroup::detail
