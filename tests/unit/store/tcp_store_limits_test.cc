// The TCP server's resource limits, with a token or without: a connection that sends nothing
// is closed after a timeout, at the connection limit such connections make way for real
// clients, and the bytes the store holds are capped (PROCGROUP_STORE_MAX_BYTES).
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "store/open_store.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"
#include "store_test_util.h"

namespace procgroup::detail {
namespace {

using store_testing::as_error;
using store_testing::Child;
using store_testing::RawConnection;
using store_testing::to_bytes;
using ::testing::HasSubstr;

std::unique_ptr<TcpStoreServer> start(TcpStoreServerOptions options) {
  options.host = "127.0.0.1";
  options.port = 0;
  auto server = TcpStoreServer::start(std::move(options));
  EXPECT_TRUE(server.ok()) << server.status().to_string();
  return server.ok() ? std::move(server).value() : nullptr;
}

std::unique_ptr<TcpStoreClient> client_of(const TcpStoreServer& server, std::string token = {}) {
  auto client = TcpStoreClient::connect({.host = "127.0.0.1",
                                         .port = server.port(),
                                         .token = std::move(token),
                                         .timeout = Millis(2000)});
  EXPECT_TRUE(client.ok()) << client.status().to_string();
  return client.ok() ? std::move(client).value() : nullptr;
}

void expect_error_then_close(RawConnection& raw, pg_status_t code, std::string_view text) {
  auto frame = raw.read_frame();
  ASSERT_TRUE(frame.has_value()) << "closed without a reason";
  auto error = as_error(*frame);
  ASSERT_TRUE(error.has_value()) << "reply is not an ERROR";
  EXPECT_EQ(error->first, code) << error->second;
  EXPECT_THAT(error->second, HasSubstr(std::string(text)));
  EXPECT_TRUE(raw.wait_closed());
}

TEST(TcpStoreLimits, ASilentConnectionWithoutATokenIsClosedAfterTheTimeout) {
  auto server = start({.auth_timeout = Millis(300)});
  ASSERT_TRUE(server);
  RawConnection silent(server->port());
  RawConnection speaking(server->port());
  ASSERT_TRUE(silent.read_hello() && speaking.read_hello());
  ASSERT_TRUE(speaking.send(FrameWriter(Op::kCheck).u32(1).str("k").finish()));
  ASSERT_TRUE(speaking.read_frame());
  const auto start_time = Clock::now();
  expect_error_then_close(silent, PG_ERR_TIMEOUT, "no request within 300 ms");
  EXPECT_LT(Clock::now() - start_time, Millis(3000));
  // A connection that spoke may stay idle as long as it likes (a rank between rendezvous).
  ASSERT_TRUE(speaking.send(FrameWriter(Op::kCheck).u32(1).str("k").finish()));
  EXPECT_TRUE(speaking.read_frame());
  // The client's own first connection is not held silent past the timeout.
  auto client = client_of(*server);
  ASSERT_TRUE(client);
  std::this_thread::sleep_for(Millis(500));
  EXPECT_TRUE(client->set("late", to_bytes("first request")).ok());
}

TEST(TcpStoreLimits, AtTheConnectionLimitSilentConnectionsMakeWayForRealClients) {
  for (const std::string token : {"", "secret"}) {
    SCOPED_TRACE(token.empty() ? "without a token" : "with a token");
    auto server = start({.token = token, .max_connections = 4});
    ASSERT_TRUE(server);
    std::vector<std::unique_ptr<RawConnection>> idle;
    for (int i = 0; i < 4; ++i) {
      idle.push_back(std::make_unique<RawConnection>(server->port()));
      ASSERT_TRUE(idle.back()->read_hello());
    }
    // Each real client (its connection and the one its first request opens) evicts the
    // oldest silent connections, never one that spoke.
    auto first = client_of(*server, token);
    ASSERT_TRUE(first);
    ASSERT_TRUE(first->set("a", to_bytes("1")).ok());
    auto second = client_of(*server, token);
    ASSERT_TRUE(second);
    EXPECT_TRUE(second->set("b", to_bytes("2")).ok());
    EXPECT_TRUE(first->get("b", Millis(1000)).ok());
    expect_error_then_close(*idle[0], PG_ERR_STORE, "sent nothing");
    EXPECT_TRUE(idle[1]->wait_closed(Millis(2000)));
  }
}

// The highest descriptor number open in this process.
int highest_fd() {
  int highest = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    highest = std::max(highest, std::atoi(entry.path().filename().c_str()));
  }
  return highest;
}

TEST(TcpStoreLimits, OutOfDescriptorsASilentConnectionMakesWay) {
  int port_pipe[2], done_pipe[2];
  ASSERT_EQ(::pipe(port_pipe), 0);
  ASSERT_EQ(::pipe(done_pipe), 0);
  // The store runs in a child whose descriptor limit leaves room for 3 connections.
  Child server_side([&] {
    auto server = TcpStoreServer::start({.host = "127.0.0.1", .port = 0});
    if (!server.ok()) return 2;
    rlimit original{};
    getrlimit(RLIMIT_NOFILE, &original);
    rlimit limit = original;
    limit.rlim_cur = static_cast<rlim_t>(highest_fd()) + 1 + 3;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) return 3;
    const int port = (*server)->port();
    if (::write(port_pipe[1], &port, sizeof port) != sizeof port) return 4;
    pollfd done{done_pipe[0], POLLIN, 0};
    const int code = ::poll(&done, 1, 20000) == 1 ? 0 : 5;
    // The server is torn down with the limit restored: UBSan's vptr check on the loop
    // thread's exit opens a pipe, and reports an error when no descriptor is left.
    if (setrlimit(RLIMIT_NOFILE, &original) != 0) return 6;
    return code;
  });
  int port = 0;
  ASSERT_EQ(::read(port_pipe[0], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  std::vector<std::unique_ptr<RawConnection>> idle(8);
  for (auto& connection : idle) connection = std::make_unique<RawConnection>(port);
  std::this_thread::sleep_for(Millis(200));
  auto client =
      TcpStoreClient::connect({.host = "127.0.0.1", .port = port, .timeout = Millis(3000)});
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  Status set = (*client)->set("in", to_bytes("despite the flood"));
  EXPECT_TRUE(set.ok()) << set.to_string();
  ASSERT_EQ(::write(done_pipe[1], "x", 1), 1);
  EXPECT_EQ(server_side.wait(Millis(5000)), 0);
  for (int fd : {port_pipe[0], port_pipe[1], done_pipe[0], done_pipe[1]}) ::close(fd);
}

TEST(TcpStoreLimits, TheStoredBytesAreCapped) {
  auto server = start({.max_bytes = 1 << 20});
  ASSERT_TRUE(server);
  auto client = client_of(*server);
  ASSERT_TRUE(client);
  const Bytes big(600 << 10, 'x');
  ASSERT_TRUE(client->set("first", big).ok());
  Status full = client->set("second", big);
  EXPECT_EQ(full.code(), PG_ERR_STORE);
  EXPECT_THAT(full.message(), HasSubstr("the store is full"));
  EXPECT_THAT(full.message(), HasSubstr("PROCGROUP_STORE_MAX_BYTES"));
  Status smaller = client->set("first", Bytes(100 << 10, 'y'));
  EXPECT_TRUE(smaller.ok()) << smaller.to_string();
  EXPECT_TRUE(client->set("second", big).ok()) << "overwriting gave the room back";
  EXPECT_EQ(client->set("third", big).code(), PG_ERR_STORE);
  EXPECT_TRUE(client->remove("second").value());
  EXPECT_TRUE(client->set("third", big).ok()) << "removing gave the room back";
}

TEST(TcpStoreLimits, AFrameLargerThanTheRoomLeftIsRefusedBeforeItsBody) {
  auto server = start({.max_bytes = 1 << 20});
  ASSERT_TRUE(server);
  RawConnection raw(server->port());
  ASSERT_TRUE(raw.read_hello());
  const Bytes frame = FrameWriter(Op::kSet).str("k").str(std::string(2 << 20, 'v')).finish();
  ASSERT_TRUE(raw.send(std::span<const uint8_t>(frame).first(64 << 10)));
  expect_error_then_close(raw, PG_ERR_STORE, "the store is full");
  auto client = client_of(*server);
  ASSERT_TRUE(client);
  EXPECT_TRUE(client->set("small", Bytes(900 << 10, 'y')).ok()) << "its room was given back";
}

TEST(TcpStoreLimits, ProcgroupStoreMaxBytesSetsTheCap) {
  StoreConfig config;
  config.url = "tcp://127.0.0.1:0";
  config.world_size = 1;
  config.timeout = Millis(2000);
  ::setenv("PROCGROUP_STORE_MAX_BYTES", "1M", 1);
  auto store = open_store(config);
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  EXPECT_TRUE((*store)->set("fits", Bytes(512 << 10, 'a')).ok());
  Status full = (*store)->set("does-not", Bytes(768 << 10, 'b'));
  EXPECT_EQ(full.code(), PG_ERR_STORE) << full.to_string();
  for (const char* bad : {"lots", "0", "-5", "12Q", "99999999999T"}) {
    ::setenv("PROCGROUP_STORE_MAX_BYTES", bad, 1);
    auto refused = open_store(config);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.status().code(), PG_ERR_CONFIG);
    EXPECT_THAT(refused.status().message(), HasSubstr("PROCGROUP_STORE_MAX_BYTES"));
  }
  ::unsetenv("PROCGROUP_STORE_MAX_BYTES");
}

// An IPv4 address of this host other than loopback; "" if it has none.
std::string non_loopback_ipv4() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* a = list; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    const in_addr addr = reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr;
    if ((ntohl(addr.s_addr) >> 24) == 127) continue;
    char text[INET_ADDRSTRLEN] = {};
    if (inet_ntop(AF_INET, &addr, text, sizeof text) != nullptr) found = text;
  }
  freeifaddrs(list);
  return found;
}

TEST(TcpStoreLimits, AStoreOpenToTheNetworkWithoutATokenSaysSoOnce) {
  const std::string address = non_loopback_ipv4();
  if (address.empty()) GTEST_SKIP() << "no address but loopback here";
  const std::string warning = "accepts any client that reaches it (no PROCGROUP_STORE_TOKEN)";
  struct Case {
    std::string host, token;
    int warnings;
  };
  for (const Case& c : {Case{address, "", 1}, Case{"127.0.0.1", "", 0}, Case{address, "t", 0}}) {
    ::testing::internal::CaptureStderr();
    {
      auto server = TcpStoreServer::start({.host = c.host, .port = 0, .token = c.token});
      EXPECT_TRUE(server.ok()) << server.status().to_string();
    }
    const std::string logged = ::testing::internal::GetCapturedStderr();
    int count = 0;
    for (size_t at = logged.find(warning); at != std::string::npos;
         at = logged.find(warning, at + 1)) {
      ++count;
    }
    EXPECT_EQ(count, c.warnings) << c.host << (c.token.empty() ? " without" : " with")
                                 << " a token:\n"
                                 << logged;
  }
}

}  // namespace
}  // namespace procgroup::detail
