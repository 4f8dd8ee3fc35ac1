// PROCGROUP_STORE_TOKEN authentication: the right token works; a wrong or missing token, a
// client that speaks before authenticating, a replayed answer and a silent client are all
// refused with PG_ERR_AUTH, and the server goes on serving. The token never crosses the wire,
// and a client with a token talks only to a store that proves it knows the token too.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <algorithm>
#include <thread>

#include "store/store_auth.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"
#include "store_test_util.h"

namespace procgroup::detail {
namespace {

using store_testing::as_error;
using store_testing::RawConnection;
using store_testing::to_bytes;
using store_testing::to_text;
using ::testing::HasSubstr;

constexpr std::string_view kToken = "correct horse battery staple";

// A listening socket on a free loopback port, for a fake store played by the test.
void listen_on_loopback(UniqueFd* listener, int* port) {
  *listener = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener->get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener->get(), 4), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(listener->get(), reinterpret_cast<sockaddr*>(&addr), &len), 0);
  *port = ntohs(addr.sin_port);
}

class TcpStoreAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = TcpStoreServer::start({.host = "127.0.0.1",
                                         .port = 0,
                                         .token = std::string(kToken),
                                         .auth_timeout = Millis(300)});
    ASSERT_TRUE(server.ok()) << server.status().to_string();
    server_ = std::move(server).value();
  }

  Result<std::unique_ptr<TcpStoreClient>> connect(std::string token) {
    return TcpStoreClient::connect({.host = "127.0.0.1",
                                    .port = server_->port(),
                                    .token = std::move(token),
                                    .timeout = Millis(3000)});
  }

  void expect_right_token_works() {
    auto client = connect(std::string(kToken));
    ASSERT_TRUE(client.ok()) << client.status().to_string();
    ASSERT_TRUE(client.value()->set("k", to_bytes("v")).ok());
    auto v = client.value()->get("k", Millis(1000));
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    EXPECT_EQ(to_text(v.value()), "v");
  }

  std::string endpoint() const { return "127.0.0.1:" + std::to_string(server_->port()); }

  std::unique_ptr<TcpStoreServer> server_;
};

TEST_F(TcpStoreAuthTest, RightTokenWorks) { expect_right_token_works(); }

TEST_F(TcpStoreAuthTest, WrongTokenIsRejectedAtOnce) {
  auto start = Clock::now();
  auto client = connect("wrong token");
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), PG_ERR_AUTH);
  EXPECT_THAT(client.status().message(),
              HasSubstr("store at " + endpoint() + " rejected our PROCGROUP_STORE_TOKEN"));
  EXPECT_LT(Clock::now() - start, Millis(2000));  // not retried until the timeout
  expect_right_token_works();
}

TEST_F(TcpStoreAuthTest, MissingTokenIsRejected) {
  auto client = connect("");
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), PG_ERR_AUTH);
  EXPECT_THAT(client.status().message(),
              HasSubstr("store at " + endpoint() + " requires PROCGROUP_STORE_TOKEN"));
  expect_right_token_works();
}

TEST_F(TcpStoreAuthTest, RequestBeforeAuthenticationIsRefused) {
  RawConnection raw(server_->port());
  bool auth_required = false;
  ASSERT_TRUE(raw.read_hello(&auth_required));
  EXPECT_TRUE(auth_required);
  ASSERT_TRUE(raw.send(FrameWriter(Op::kSet).str("k").str("v").finish()));
  auto reply = raw.read_frame();
  ASSERT_TRUE(reply && as_error(*reply));
  EXPECT_EQ(as_error(*reply)->first, PG_ERR_AUTH);
  EXPECT_TRUE(raw.wait_closed());
  expect_right_token_works();
}

TEST_F(TcpStoreAuthTest, LargeFrameBeforeAuthenticationIsRefused) {
  RawConnection raw(server_->port());
  ASSERT_TRUE(raw.read_hello());
  ASSERT_TRUE(raw.send(FrameWriter(Op::kSet).str("k").str(std::string(1000, 'v')).finish()));
  auto reply = raw.read_frame();
  ASSERT_TRUE(reply && as_error(*reply));
  EXPECT_THAT(as_error(*reply)->second, HasSubstr("not authenticated"));
  EXPECT_TRUE(raw.wait_closed());
  expect_right_token_works();
}

TEST_F(TcpStoreAuthTest, AnswerForAnotherConnectionsNonceIsRejected) {
  RawConnection first(server_->port());
  RawConnection second(server_->port());
  auto nonce1 = first.read_hello();
  auto nonce2 = second.read_hello();
  ASSERT_TRUE(nonce1 && nonce2);
  EXPECT_NE(*nonce1, *nonce2);
  // A valid answer, replayed on a connection with a different nonce.
  ASSERT_TRUE(second.send(
      FrameWriter(Op::kAuth).raw(auth_answer(kToken, *nonce1)).raw(*nonce2).finish()));
  auto reply = second.read_frame();
  ASSERT_TRUE(reply && as_error(*reply));
  EXPECT_EQ(as_error(*reply)->first, PG_ERR_AUTH);
  EXPECT_TRUE(second.wait_closed());
  // The right answer on the first connection is accepted.
  const Nonce mine = *nonce2;  // any client nonce: the proof must cover it
  ASSERT_TRUE(
      first.send(FrameWriter(Op::kAuth).raw(auth_answer(kToken, *nonce1)).raw(mine).finish()));
  reply = first.read_frame();
  ASSERT_TRUE(reply);
  ASSERT_EQ(static_cast<Op>(reply->front()), Op::kValue);
  FrameReader r(*reply);
  r.u8();
  auto proof = r.str("proof", kMacBytes);
  EXPECT_TRUE(r.finish());
  EXPECT_TRUE(proof_verify(kToken, mine, *nonce1, proof)) << "the store proves the token";
  EXPECT_FALSE(proof_verify("another token", mine, *nonce1, proof));
}

TEST_F(TcpStoreAuthTest, SilentClientIsClosedAfterTheAuthDeadline) {
  RawConnection raw(server_->port());
  ASSERT_TRUE(raw.read_hello());
  auto start = Clock::now();
  auto reply = raw.read_frame(Millis(5000));
  ASSERT_TRUE(reply && as_error(*reply));
  EXPECT_EQ(as_error(*reply)->first, PG_ERR_AUTH);
  EXPECT_TRUE(raw.wait_closed());
  EXPECT_LT(Clock::now() - start, Millis(3000));
  expect_right_token_works();
}

TEST(TcpStoreAuthWireTest, TokenNeverCrossesTheWire) {
  // A fake store: sends HELLO with a known nonce and records what the client answers.
  UniqueFd listener;
  int port = 0;
  ASSERT_NO_FATAL_FAILURE(listen_on_loopback(&listener, &port));
  Nonce nonce{};
  for (size_t i = 0; i < nonce.size(); ++i) nonce[i] = static_cast<uint8_t>(i * 13);
  Bytes received;
  std::thread fake([&] {
    UniqueFd conn(::accept(listener.get(), nullptr, nullptr));
    Bytes hello =
        FrameWriter(Op::kHello).u32(kProtocolMagic).u8(kProtocolVersion).u8(1).raw(nonce).finish();
    (void)send_all(conn.get(), hello, Deadline::after(Millis(2000)));
    received.resize(kFrameHeaderBytes + 1 + kMacBytes + kNonceBytes);
    (void)recv_exact(conn.get(), received, Deadline::after(Millis(2000)));
    Bytes error = FrameWriter(Op::kError).u32(PG_ERR_AUTH).str("no").finish();
    (void)send_all(conn.get(), error, Deadline::after(Millis(2000)));
  });
  auto client = TcpStoreClient::connect(
      {.host = "127.0.0.1", .port = port, .token = std::string(kToken), .timeout = Millis(3000)});
  fake.join();
  EXPECT_EQ(client.status().code(), PG_ERR_AUTH);
  std::string wire = to_text(received);
  EXPECT_EQ(wire.find(kToken), std::string::npos);
  Mac expected = auth_answer(kToken, nonce);
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), received.begin() + 9));
  EXPECT_EQ(received[8], static_cast<uint8_t>(Op::kAuth));
}

TEST(TcpStoreAuthWireTest, ClientWithATokenRefusesAStoreWithoutOne) {
  // Such a store cannot prove it knows the token: rank 0 lacks it, or it is not our store.
  auto server = TcpStoreServer::start({.host = "127.0.0.1", .port = 0});
  ASSERT_TRUE(server.ok());
  auto client = TcpStoreClient::connect(
      {.host = "127.0.0.1", .port = server.value()->port(), .token = "extra"});
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), PG_ERR_AUTH);
  EXPECT_THAT(client.status().message(), HasSubstr("does not check PROCGROUP_STORE_TOKEN"));
  auto plain = TcpStoreClient::connect({.host = "127.0.0.1", .port = server.value()->port()});
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
}

TEST(TcpStoreAuthWireTest, StoreThatCannotProveTheTokenIsRefused) {
  // A fake store that asks for authentication and accepts any answer, as a program
  // squatting MASTER_PORT would: without the token it cannot compute the proof.
  UniqueFd listener;
  int port = 0;
  ASSERT_NO_FATAL_FAILURE(listen_on_loopback(&listener, &port));
  std::thread fake([&] {
    UniqueFd conn(::accept(listener.get(), nullptr, nullptr));
    Nonce nonce{};
    Bytes hello =
        FrameWriter(Op::kHello).u32(kProtocolMagic).u8(kProtocolVersion).u8(1).raw(nonce).finish();
    (void)send_all(conn.get(), hello, Deadline::after(Millis(2000)));
    Bytes answer(kFrameHeaderBytes + 1 + kMacBytes + kNonceBytes);
    (void)recv_exact(conn.get(), answer, Deadline::after(Millis(2000)));
    Mac guess{};  // what an impostor can offer
    Bytes reply = FrameWriter(Op::kValue).str(std::span<const uint8_t>(guess)).finish();
    (void)send_all(conn.get(), reply, Deadline::after(Millis(2000)));
  });
  auto client = TcpStoreClient::connect({.host = "127.0.0.1",
                                         .port = port,
                                         .token = std::string(kToken),
                                         .timeout = Millis(3000)});
  fake.join();
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), PG_ERR_AUTH);
  EXPECT_THAT(client.status().message(), HasSubstr("did not prove it knows"));
}

}  // namespace
}  // namespace procgroup::detail
