// The c10d store client without torch: c10d:// URLs, the validated protocol of torch >= 2.3
// against stand-ins for its classic and libuv servers (FakeC10dServer), and what a user
// reads when the store refuses, stays silent or is not a TCPStore at all.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include "c10d_test_servers.h"
#include "store/c10d_store_client.h"
#include "store/open_store.h"
#include "store/tcp_store_server.h"
#include "store_test_util.h"

namespace procgroup::detail {
namespace {

using store_testing::FakeC10dServer;
using store_testing::to_bytes;
using store_testing::to_text;
using ::testing::HasSubstr;

TEST(C10dUrlTest, ParsesHostPortPrefixAndAgent) {
  auto plain = parse_store_url("c10d://10.1.2.3:29500");
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_EQ(plain->kind, StoreUrl::kC10d);
  EXPECT_EQ(plain->host, "10.1.2.3");
  EXPECT_EQ(plain->port, 29500);
  EXPECT_EQ(plain->key_prefix, "procgroup/");
  EXPECT_FALSE(plain->agent);

  auto agent = parse_store_url("c10d://[fe80::1%eth0]:1/procgroup/attempt_3/?agent");
  ASSERT_TRUE(agent.ok()) << agent.status().to_string();
  EXPECT_EQ(agent->host, "fe80::1%eth0");
  EXPECT_EQ(agent->port, 1);
  EXPECT_EQ(agent->key_prefix, "procgroup/attempt_3/");
  EXPECT_TRUE(agent->agent);

  EXPECT_EQ(parse_store_url("c10d://node-01:2/jobs/a")->key_prefix, "jobs/a/");
  EXPECT_EQ(parse_store_url("c10d://node-01:2/")->key_prefix, "procgroup/");
}

TEST(C10dUrlTest, MalformedUrlsAreConfigErrors) {
  for (const char* url : {"c10d://", "c10d://host", "c10d://host:0", "c10d://fe80::1:5",
                          "c10d://host:5?standalone", "c10d://[::1]/x", "c10d://host:99999/"}) {
    auto parsed = parse_store_url(url);
    ASSERT_FALSE(parsed.ok()) << url;
    EXPECT_EQ(parsed.status().code(), PG_ERR_CONFIG) << url;
    EXPECT_THAT(parsed.status().message(), HasSubstr(url));
  }
}

class C10dValidatedTest : public ::testing::TestWithParam<FakeC10dServer::Flavor> {};

TEST_P(C10dValidatedTest, DetectsVALIDATEAndEveryOperationWorks) {
  FakeC10dServer server(GetParam());
  ASSERT_NE(server.port(), 0);
  auto client = C10dStoreClient::connect({"127.0.0.1", server.port(), "procgroup/attempt_0/",
                                          "torch's c10d TCPStore", Millis(5000)});
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  auto& store = **client;
  EXPECT_EQ(store.protocol(), C10dStoreClient::Protocol::kValidated);
  EXPECT_EQ(server.unvalidated(), 1);  // the probe's connection, and nothing else

  ASSERT_TRUE(store.set("k", to_bytes("v")).ok());
  EXPECT_EQ(to_text(store.get("k", Millis(5000)).value()), "v");
  EXPECT_EQ(store.add("n", 3).value(), 3);
  EXPECT_EQ(store.add("n", 4).value(), 7);
  EXPECT_EQ(to_text(store.compare_set("c", to_bytes(""), to_bytes("a")).value()), "a");
  EXPECT_EQ(to_text(store.compare_set("c", to_bytes("a"), to_bytes("b")).value()), "b");
  EXPECT_EQ(to_text(store.compare_set("gone", to_bytes("x"), to_bytes("y")).value()), "");
  std::vector<std::string> keys{"k", "n"};
  EXPECT_TRUE(store.check(keys).value());
  EXPECT_TRUE(store.wait(keys, Millis(2000)).ok());
  EXPECT_TRUE(store.remove("k").value());
  EXPECT_FALSE(store.check(keys).value());

  auto missing = store.get("missing", Millis(200));
  EXPECT_EQ(missing.status().code(), PG_ERR_TIMEOUT);
  EXPECT_THAT(missing.status().message(), HasSubstr("'missing'"));
  ASSERT_TRUE(store.set("missing", to_bytes("late")).ok());
  EXPECT_EQ(to_text(store.get("missing", Millis(2000)).value()), "late");
  EXPECT_EQ(server.unvalidated(), 1);  // every later connection sent VALIDATE first
}

INSTANTIATE_TEST_SUITE_P(Servers, C10dValidatedTest,
                         ::testing::Values(FakeC10dServer::Flavor::kClassic,
                                           FakeC10dServer::Flavor::kLibuv),
                         [](const auto& param_info) {
                           return param_info.param == FakeC10dServer::Flavor::kClassic
                                      ? "Classic"
                                      : "Libuv";
                         });

// A socket on 127.0.0.1, listening if asked: connections then sit in its backlog, unanswered.
struct Port {
  explicit Port(bool listening) {
    fd.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return;
    if (listening && ::listen(fd.get(), 4) != 0) return;
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) return;
    port = ntohs(addr.sin_port);
  }
  UniqueFd fd;
  int port = 0;
};

StoreConfig config(const std::string& url, Millis timeout) {
  return StoreConfig{url, 0, 2, "", timeout};
}

TEST(C10dErrorsTest, RefusedAgentStoreSaysWhichStoreAndWhy) {
  Port closed(false);
  ASSERT_NE(closed.port, 0);
  std::string where = "127.0.0.1:" + std::to_string(closed.port);
  auto store = open_store(config("c10d://" + where + "/procgroup/attempt_0/?agent", Millis(300)));
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), PG_ERR_STORE);
  EXPECT_THAT(store.status().message(),
              HasSubstr("torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE=True) at " + where));
  EXPECT_THAT(store.status().message(), HasSubstr("refused"));
  EXPECT_THAT(store.status().message(), HasSubstr("MASTER_PORT"));
}

TEST(C10dErrorsTest, ASilentServerTimesOut) {
  Port silent(true);  // accepts (in the kernel's backlog) and never answers
  ASSERT_NE(silent.port, 0);
  auto store = open_store(config("c10d://127.0.0.1:" + std::to_string(silent.port), Millis(300)));
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), PG_ERR_STORE);
  EXPECT_THAT(store.status().message(), HasSubstr("no answer"));
  EXPECT_THAT(store.status().message(), HasSubstr("timed out"));
}

TEST(C10dErrorsTest, OurOwnStoreIsAnUnknownProtocol) {
  TcpStoreServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  auto server = TcpStoreServer::start(std::move(options));
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  std::string where = "127.0.0.1:" + std::to_string((*server)->port());
  auto store = open_store(config("c10d://" + where, Millis(3000)));
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), PG_ERR_STORE);
  EXPECT_THAT(store.status().message(), HasSubstr("torch's c10d TCPStore at " + where));
  EXPECT_THAT(store.status().message(), HasSubstr("unknown protocol"));
}

TEST(C10dErrorsTest, ValuesOverTorchsLimitAreRefusedBeforeSending) {
  FakeC10dServer server(FakeC10dServer::Flavor::kClassic);
  auto client = C10dStoreClient::connect({"127.0.0.1", server.port(), "p/",
                                          "torch's c10d TCPStore", Millis(5000)});
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  Bytes big(kMaxC10dValueBytes + 1);
  Status set = (*client)->set("big", big);
  EXPECT_EQ(set.code(), PG_ERR_INVALID_ARGUMENT);
  EXPECT_THAT(set.message(), HasSubstr("'big'"));
  EXPECT_TRUE((*client)->set("small", to_bytes("fine")).ok());
}

}  // namespace
}  // namespace procgroup::detail
