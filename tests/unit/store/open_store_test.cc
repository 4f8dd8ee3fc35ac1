// open_store(): URL parsing, the rank 0 server's lifetime, and the errors a user meets
// (port in use, nothing listening, malformed URLs).
#include "store/open_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <unistd.h>

#include "store/store.h"
#include "store_test_util.h"

namespace procgroup::detail {
namespace {

using store_testing::TempDir;
using store_testing::to_bytes;
using store_testing::to_text;
using ::testing::HasSubstr;

// A TCP socket bound to 127.0.0.1 on an ephemeral port; listening only if asked. Holding
// it keeps the port ours, so tests never collide.
struct BoundPort {
  explicit BoundPort(bool listening) {
    fd.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return;
    if (listening && ::listen(fd.get(), 4) != 0) return;
    socklen_t len = sizeof addr;
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
    port = ntohs(addr.sin_port);
  }
  UniqueFd fd;
  int port = 0;
};

StoreConfig config(std::string url, int rank, int size, Millis timeout = Millis(5000)) {
  StoreConfig c;
  c.url = std::move(url);
  c.rank = rank;
  c.world_size = size;
  c.timeout = timeout;
  return c;
}

TEST(OpenStoreTest, PortInUseIsAClearStoreError) {
  BoundPort taken(true);
  ASSERT_NE(taken.port, 0);
  std::string where = "127.0.0.1:" + std::to_string(taken.port);
  auto store = open_store(config("tcp://" + where, 0, 2));
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), PG_ERR_STORE);
  EXPECT_THAT(store.status().message(), HasSubstr("cannot listen on " + where));
  EXPECT_THAT(store.status().message(), HasSubstr("Address already in use"));
  EXPECT_THAT(store.status().message(), HasSubstr("MASTER_PORT"));
}

TEST(OpenStoreTest, NothingListeningFailsAfterTheTimeout) {
  BoundPort silent(false);  // bound, never listening: connections are refused
  ASSERT_NE(silent.port, 0);
  std::string where = "127.0.0.1:" + std::to_string(silent.port);
  auto start = Clock::now();
  auto store = open_store(config("tcp://" + where, 1, 2, Millis(400)));
  auto elapsed = Clock::now() - start;
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), PG_ERR_STORE);
  EXPECT_THAT(store.status().message(), HasSubstr("cannot connect to the store at " + where));
  EXPECT_THAT(store.status().message(), HasSubstr("Connection refused"));
  EXPECT_GE(elapsed, Millis(350));  // it retried until the timeout
  EXPECT_LT(elapsed, Millis(3000));
}

TEST(OpenStoreTest, MalformedUrlsAreConfigErrorsNamingTheUrl) {
  for (const char* url : {"",
                          "tcp://",
                          "tcp://host",
                          "tcp://host:",
                          "tcp://:29500",
                          "tcp://host:abc",
                          "tcp://host:70000",
                          "tcp://host:-1",
                          "tcp://::1:29500",
                          "tcp://[::1]29500",
                          "tcp://[::1",
                          "tcp://[127.0.0.1]:5",
                          "tcp://ho st:1",
                          "tcp://host:1/",
                          "file://",
                          "file://relative/path",
                          "file:///",
                          "http://host:1",
                          "memory",
                          "memory:x",
                          "TCP://host:1"}) {
    auto store = open_store(config(url, 0, 1));
    ASSERT_FALSE(store.ok()) << url;
    EXPECT_EQ(store.status().code(), PG_ERR_CONFIG) << url;
    EXPECT_THAT(store.status().message(), HasSubstr("'" + std::string(url) + "'")) << url;
  }
}

TEST(OpenStoreTest, ParsesEveryUrlForm) {
  auto v4 = parse_store_url("tcp://10.1.2.3:29500");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->kind, StoreUrl::kTcp);
  EXPECT_EQ(v4->host, "10.1.2.3");
  EXPECT_EQ(v4->port, 29500);
  auto name = parse_store_url("tcp://node-01.cluster:1");
  ASSERT_TRUE(name.ok());
  EXPECT_EQ(name->host, "node-01.cluster");
  auto v6 = parse_store_url("tcp://[fe80::1%eth0]:65535");
  ASSERT_TRUE(v6.ok()) << v6.status().to_string();
  EXPECT_EQ(v6->host, "fe80::1%eth0");
  EXPECT_EQ(v6->port, 65535);
  auto file = parse_store_url("file:///tmp/job 42/");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->kind, StoreUrl::kFile);
  EXPECT_EQ(file->path, "/tmp/job 42/");
  EXPECT_EQ(parse_store_url("file://localhost/tmp/x")->path, "/tmp/x");
  EXPECT_EQ(parse_store_url("memory:")->kind, StoreUrl::kMemory);
}

TEST(OpenStoreTest, RankZeroHostsTheServerForOtherRanks) {
  // A free port: reserve one, release it, and retry if someone else grabs it meanwhile.
  std::shared_ptr<Store> rank0;
  std::string url;
  for (int attempt = 0; attempt < 5 && !rank0; ++attempt) {
    int port = BoundPort(false).port;
    url = "tcp://127.0.0.1:" + std::to_string(port);
    auto store = open_store(config(url, 0, 2, Millis(1000)));
    if (store.ok()) rank0 = store.value();
  }
  ASSERT_NE(rank0, nullptr);
  auto rank1 = open_store(config(url, 1, 2, Millis(1000)));
  ASSERT_TRUE(rank1.ok()) << rank1.status().to_string();
  ASSERT_TRUE(rank1.value()->set("from/1", to_bytes("hello 0")).ok());
  EXPECT_EQ(to_text(rank0->get("from/1", Millis(1000)).value()), "hello 0");
  rank0.reset();  // the server goes with it
  auto start = Clock::now();
  Status lost = rank1.value()->set("after", to_bytes("x"));
  EXPECT_EQ(lost.code(), PG_ERR_STORE) << lost.to_string();
  EXPECT_THAT(lost.message(), HasSubstr(url.substr(6)));
  EXPECT_LT(Clock::now() - start, Millis(4000));
}

TEST(OpenStoreTest, RankZeroWithTokenRequiresItFromOthers) {
  StoreConfig c0 = config("tcp://127.0.0.1:0", 0, 1);
  c0.token = "s3cret";
  auto store = open_store(c0);
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  EXPECT_EQ(store.value()->add("n", 1).value(), 1);
}

TEST(OpenStoreTest, Ipv6LoopbackWorksWhereAvailable) {
  UniqueFd probe(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in6 addr{};
  addr.sin6_family = AF_INET6;
  addr.sin6_addr = in6addr_loopback;
  if (!probe.valid() || ::bind(probe.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr)) {
    GTEST_SKIP() << "no IPv6 loopback here";
  }
  auto store = open_store(config("tcp://[::1]:0", 0, 1));
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  ASSERT_TRUE(store.value()->set("v6", to_bytes("yes")).ok());
  EXPECT_EQ(to_text(store.value()->get("v6", Millis(1000)).value()), "yes");
}

TEST(OpenStoreTest, HostNameIsResolved) {
  auto store = open_store(config("tcp://localhost:0", 0, 1));
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  EXPECT_EQ(store.value()->add("n", 2).value(), 2);
}

TEST(OpenStoreTest, FileUrlSharesADirectory) {
  TempDir dir;
  std::string url = "file://" + dir.path() + "/nested/store";
  auto a = open_store(config(url, 0, 2));
  auto b = open_store(config(url, 1, 2));
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().to_string() << b.status().to_string();
  ASSERT_TRUE(a.value()->set("k", to_bytes("shared")).ok());
  EXPECT_EQ(to_text(b.value()->get("k", Millis(1000)).value()), "shared");
}

TEST(OpenStoreTest, MemoryIsForOneRankOnly) {
  auto one = open_store(config("memory:", 0, 1));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one.value()->add("n", 1).value(), 1);
  auto two = open_store(config("memory:", 0, 2));
  EXPECT_EQ(two.status().code(), PG_ERR_CONFIG);
  EXPECT_THAT(two.status().message(), HasSubstr("memory:"));
}

TEST(OpenStoreTest, RejectsInconsistentConfigs) {
  EXPECT_EQ(open_store(config("tcp://127.0.0.1:0", 0, 2)).status().code(), PG_ERR_CONFIG);
  EXPECT_EQ(open_store(config("memory:", 2, 2)).status().code(), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(open_store(config("memory:", -1, 1)).status().code(), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(open_store(config("memory:", 0, 1, Millis(0))).status().code(),
            PG_ERR_INVALID_ARGUMENT);
}

TEST(OpenStoreTest, UnresolvableHostFailsClearly) {
  auto store = open_store(config("tcp://no-such-host.invalid:29500", 1, 2, Millis(200)));
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), PG_ERR_STORE);
  EXPECT_THAT(store.status().message(), HasSubstr("no-such-host.invalid"));
}

}  // namespace
}  // namespace procgroup::detail
