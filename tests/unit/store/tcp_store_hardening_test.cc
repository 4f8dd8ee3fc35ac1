// The TCP server against hostile or broken clients, over raw sockets. After each attack the
// server must have answered with an ERROR where it could, closed that connection, and
// still serve a legitimate client promptly.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

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

class TcpStoreHardeningTest : public ::testing::Test {
 protected:
  void start(TcpStoreServerOptions options = {}) {
    options.host = "127.0.0.1";
    options.port = 0;
    auto server = TcpStoreServer::start(std::move(options));
    ASSERT_TRUE(server.ok()) << server.status().to_string();
    server_ = std::move(server).value();
  }
  void SetUp() override { start(); }
  int port() const { return server_->port(); }

  // A fresh, legitimate client gets correct answers, quickly.
  void expect_still_serving(Millis timeout = Millis(5000)) {
    auto start = Clock::now();
    auto client =
        TcpStoreClient::connect({.host = "127.0.0.1", .port = port(), .timeout = timeout});
    ASSERT_TRUE(client.ok()) << client.status().to_string();
    std::string key = "alive/" + std::to_string(++probes_);
    ASSERT_TRUE(client.value()->set(key, to_bytes("yes")).ok());
    auto v = client.value()->get(key, Millis(1000));
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    EXPECT_EQ(to_text(v.value()), "yes");
    EXPECT_EQ(client.value()->add("alive/count", 1).value(), probes_);
    EXPECT_LT(Clock::now() - start, Millis(2000));
  }

  // raw reads an ERROR with code, whose message contains text, and is then closed.
  static void expect_error_then_close(RawConnection& raw, pg_status_t code, std::string_view text) {
    auto frame = raw.read_frame();
    ASSERT_TRUE(frame.has_value()) << "no reply before the connection closed";
    auto error = as_error(*frame);
    ASSERT_TRUE(error.has_value()) << "reply is not an ERROR";
    EXPECT_EQ(error->first, code) << error->second;
    EXPECT_THAT(error->second, HasSubstr(std::string(text)));
    EXPECT_TRUE(raw.wait_closed());
  }

  std::unique_ptr<TcpStoreServer> server_;
  int probes_ = 0;
};

Bytes header(uint64_t length) {
  Bytes out(kFrameHeaderBytes);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(length >> (56 - 8 * i));
  return out;
}

TEST_F(TcpStoreHardeningTest, GarbageBytesGetAnErrorAndAClose) {
  RawConnection raw(port());
  ASSERT_TRUE(raw.read_hello());
  ASSERT_TRUE(raw.send("GET / HTTP/1.1\r\nHost: store\r\n\r\n"));
  expect_error_then_close(raw, PG_ERR_STORE, "frame length");
  expect_still_serving();
}

TEST_F(TcpStoreHardeningTest, UnknownCommandGetsAnErrorAndAClose) {
  RawConnection raw(port());
  ASSERT_TRUE(raw.read_hello());
  Bytes frame = header(3);
  frame.insert(frame.end(), {0x7f, 1, 2});
  ASSERT_TRUE(raw.send(frame));
  expect_error_then_close(raw, PG_ERR_STORE, "unknown command 0x7f");
  expect_still_serving();
}

TEST_F(TcpStoreHardeningTest, TruncatedFrameThenCloseIsReported) {
  RawConnection raw(port());
  ASSERT_TRUE(raw.read_hello());
  Bytes frame = FrameWriter(Op::kSet).str("key").str(std::string(100, 'v')).finish();
  frame.resize(frame.size() - 40);
  ASSERT_TRUE(raw.send(frame));
  raw.shutdown_write();
  expect_error_then_close(raw, PG_ERR_STORE, "truncated frame");
  expect_still_serving();
}

TEST_F(TcpStoreHardeningTest, HugeLengthHeaderIsRefusedWithoutWaitingForTheBody) {
  RawConnection raw(port());
  ASSERT_TRUE(raw.read_hello());
  ASSERT_TRUE(raw.send(header(uint64_t{1} << 40)));
  expect_error_then_close(raw, PG_ERR_STORE, "1099511627776");
  expect_still_serving();
}

TEST_F(TcpStoreHardeningTest, MalformedFieldsAreRefused) {
  RawConnection raw(port());
  ASSERT_TRUE(raw.read_hello());
  // SET whose key length claims more bytes than the frame holds.
  Bytes frame = header(1 + 4 + 2);
  frame.insert(frame.end(), {static_cast<uint8_t>(Op::kSet), 0, 0, 0, 50, 'a', 'b'});
  ASSERT_TRUE(raw.send(frame));
  expect_error_then_close(raw, PG_ERR_STORE, "malformed set request");
  // GET with trailing bytes.
  RawConnection raw2(port());
  ASSERT_TRUE(raw2.read_hello());
  Bytes get = FrameWriter(Op::kGet).i64(10).str("k").u8(9).finish();
  ASSERT_TRUE(raw2.send(get));
  expect_error_then_close(raw2, PG_ERR_STORE, "trailing");
  expect_still_serving();
}

TEST_F(TcpStoreHardeningTest, KeyOverTheLimitIsRefused) {
  RawConnection raw(port());
  ASSERT_TRUE(raw.read_hello());
  ASSERT_TRUE(raw.send(FrameWriter(Op::kSet).str(std::string(5000, 'k')).str("v").finish()));
  expect_error_then_close(raw, PG_ERR_STORE, "key of 5000 bytes exceeds the limit of 4096");
  expect_still_serving();
}

TEST_F(TcpStoreHardeningTest, TooManyKeysInOneWaitIsRefused) {
  RawConnection raw(port());
  ASSERT_TRUE(raw.read_hello());
  ASSERT_TRUE(raw.send(FrameWriter(Op::kCheck).u32(1u << 30).finish()));
  expect_error_then_close(raw, PG_ERR_STORE, "exceeds the limit of 1024");
  expect_still_serving();
}

TEST_F(TcpStoreHardeningTest, RequestErrorsKeepTheConnectionUsable) {
  RawConnection raw(port());
  ASSERT_TRUE(raw.read_hello());
  ASSERT_TRUE(raw.send(FrameWriter(Op::kSet).str("").str("v").finish()));
  auto reply = raw.read_frame();
  ASSERT_TRUE(reply);
  ASSERT_TRUE(as_error(*reply));
  EXPECT_EQ(as_error(*reply)->first, PG_ERR_INVALID_ARGUMENT);
  // Same connection, valid request.
  ASSERT_TRUE(raw.send(FrameWriter(Op::kAdd).str("n").i64(4).finish()));
  reply = raw.read_frame();
  ASSERT_TRUE(reply);
  FrameReader r(*reply);
  EXPECT_EQ(static_cast<Op>(r.u8()), Op::kInt);
  EXPECT_EQ(r.i64(), 4);
}

TEST_F(TcpStoreHardeningTest, PipelinedRequestsAreAnsweredInOrder) {
  RawConnection raw(port());
  ASSERT_TRUE(raw.read_hello());
  Bytes batch;
  for (Bytes f : {FrameWriter(Op::kAdd).str("seen").i64(1).finish(),  // answered at once
                  FrameWriter(Op::kGet).i64(5000).str("later").finish(),  // waits
                  FrameWriter(Op::kAdd).str("n").i64(1).finish()}) {
    batch.insert(batch.end(), f.begin(), f.end());
  }
  ASSERT_TRUE(raw.send(batch));
  // The server replies once it has read and handled all it received in one go (a single
  // small send), so "seen" answered means the GET waits and the ADD of "n" has arrived.
  auto seen = raw.read_frame();
  ASSERT_TRUE(seen);
  ASSERT_EQ(static_cast<Op>(seen->front()), Op::kInt);
  auto client = TcpStoreClient::connect({.host = "127.0.0.1", .port = port()});
  ASSERT_TRUE(client.ok());
  EXPECT_FALSE(client.value()->check(std::vector<std::string>{"n"}).value());  // held back
  ASSERT_TRUE(client.value()->set("later", to_bytes("now")).ok());
  auto first = raw.read_frame();
  auto second = raw.read_frame();
  ASSERT_TRUE(first && second);
  FrameReader r1(*first);
  EXPECT_EQ(static_cast<Op>(r1.u8()), Op::kValue);
  EXPECT_EQ(as_chars(r1.str("value", 100)), "now");
  FrameReader r2(*second);
  EXPECT_EQ(static_cast<Op>(r2.u8()), Op::kInt);
  EXPECT_EQ(r2.i64(), 1);
}

TEST_F(TcpStoreHardeningTest, FrameSentOneByteAtATimeIsAssembled) {
  RawConnection raw(port());
  ASSERT_TRUE(raw.read_hello());
  Bytes frame = FrameWriter(Op::kSet).str("slow").str("but fine").finish();
  for (uint8_t b : frame) {
    ASSERT_TRUE(raw.send(std::span<const uint8_t>(&b, 1)));
    std::this_thread::sleep_for(Millis(2));
  }
  auto reply = raw.read_frame();
  ASSERT_TRUE(reply);
  EXPECT_EQ(static_cast<Op>(reply->front()), Op::kOk);
}

TEST_F(TcpStoreHardeningTest, SlowlorisDoesNotStallOthersAndIsClosed) {
  server_.reset();
  start({.stalled_frame_timeout = Millis(400)});
  RawConnection half_header(port());
  RawConnection half_frame(port());
  ASSERT_TRUE(half_header.read_hello() && half_frame.read_hello());
  Bytes frame = FrameWriter(Op::kSet).str("k").str(std::string(1000, 'v')).finish();
  ASSERT_TRUE(half_header.send(std::span<const uint8_t>(frame).first(4)));
  ASSERT_TRUE(half_frame.send(std::span<const uint8_t>(frame).first(frame.size() / 2)));
  // Both stall; others are served meanwhile.
  expect_still_serving();
  expect_still_serving();
  auto start = Clock::now();
  expect_error_then_close(half_frame, PG_ERR_TIMEOUT, "stalled");
  EXPECT_TRUE(half_header.wait_closed());
  EXPECT_LT(Clock::now() - start, Millis(3000));
  expect_still_serving();
}

// Connections that have sent a request; a silent one could be evicted instead (below).
std::unique_ptr<RawConnection> speaking_connection(int port) {
  auto raw = std::make_unique<RawConnection>(port);
  EXPECT_TRUE(raw->read_hello());
  EXPECT_TRUE(raw->send(FrameWriter(Op::kCheck).u32(1).str("anything").finish()));
  EXPECT_TRUE(raw->read_frame());
  return raw;
}

TEST_F(TcpStoreHardeningTest, TooManyConnectionsAreRefusedAndServiceResumes) {
  server_.reset();
  start({.max_connections = 3});
  std::vector<std::unique_ptr<RawConnection>> held(3);
  for (auto& slot : held) slot = speaking_connection(port());
  RawConnection extra(port());
  auto refused = extra.read_frame();
  ASSERT_TRUE(refused);
  ASSERT_TRUE(as_error(*refused));
  EXPECT_THAT(as_error(*refused)->second, HasSubstr("too many connections"));
  EXPECT_TRUE(extra.wait_closed());
  auto client =
      TcpStoreClient::connect({.host = "127.0.0.1", .port = port(), .timeout = Millis(1000)});
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), PG_ERR_STORE);
  EXPECT_THAT(client.status().message(), HasSubstr("too many connections"));
  held.pop_back();  // one slot frees up
  expect_still_serving();
}

TEST_F(TcpStoreHardeningTest, ClientThatLeavesWhileWaitingIsForgotten) {
  {
    RawConnection raw(port());
    ASSERT_TRUE(raw.read_hello());
    ASSERT_TRUE(raw.send(FrameWriter(Op::kGet).i64(60000).str("awaited").finish()));
    std::vector<std::string> keys = {"awaited", "other"};
    ASSERT_TRUE(
        raw.send(FrameWriter(Op::kWait).i64(60000).u32(2).str(keys[0]).str(keys[1]).finish()));
    std::this_thread::sleep_for(Millis(50));
  }  // closes while its GET is held
  std::this_thread::sleep_for(Millis(50));
  auto client = TcpStoreClient::connect({.host = "127.0.0.1", .port = port()});
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(client.value()->set("awaited", to_bytes("x")).ok());
  expect_still_serving();
}

TEST_F(TcpStoreHardeningTest, ServerSideTimeoutRepliesForGetAndWait) {
  RawConnection raw(port());
  ASSERT_TRUE(raw.read_hello());
  ASSERT_TRUE(raw.send(FrameWriter(Op::kGet).i64(100).str("nope").finish()));
  auto reply = raw.read_frame(Millis(3000));
  ASSERT_TRUE(reply);
  ASSERT_TRUE(as_error(*reply));
  EXPECT_EQ(as_error(*reply)->first, PG_ERR_TIMEOUT);
  EXPECT_THAT(as_error(*reply)->second, HasSubstr("'nope'"));
  // The connection stays usable after a timeout.
  ASSERT_TRUE(raw.send(FrameWriter(Op::kWait).i64(0).u32(1).str("nope").finish()));
  reply = raw.read_frame(Millis(3000));
  ASSERT_TRUE(reply && as_error(*reply));
  EXPECT_EQ(as_error(*reply)->first, PG_ERR_TIMEOUT);
}

// A server that exited refuses connections: a client fails at once instead of retrying for
// its whole reply grace (3 s here), naming the store and what happened.
TEST_F(TcpStoreHardeningTest, ClientFailsPromptlyOnceTheServerIsGone) {
  auto client =
      TcpStoreClient::connect({.host = "127.0.0.1", .port = port(), .timeout = Millis(3000)});
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  ASSERT_TRUE(client.value()->set("k", to_bytes("v")).ok());
  const std::string endpoint = "127.0.0.1:" + std::to_string(port());
  server_.reset();
  auto start = Clock::now();
  auto got = client.value()->get("missing", Millis(60000));
  EXPECT_LT(Clock::now() - start, Millis(1000));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), PG_ERR_STORE);
  EXPECT_THAT(got.status().message(), HasSubstr(endpoint));
  EXPECT_THAT(got.status().message(), HasSubstr("went away"));
}

// A server that is only busy (it refuses with an ERROR: too many connections) still gets
// the grace: the request goes through once a slot frees up.
TEST_F(TcpStoreHardeningTest, BusyServerStillGetsTheGrace) {
  server_.reset();
  start({.max_connections = 1});
  auto client =
      TcpStoreClient::connect({.host = "127.0.0.1", .port = port(), .timeout = Millis(3000)});
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  RawConnection holder(port());  // takes the only slot, and speaks so it is not evicted
  ASSERT_TRUE(holder.read_hello());
  ASSERT_TRUE(holder.send(FrameWriter(Op::kSet).str("k").str("v").finish()));
  ASSERT_TRUE(holder.read_frame());
  std::thread release([&] {
    std::this_thread::sleep_for(Millis(300));
    holder.close();
  });
  auto got = client.value()->get("k", Millis(1000));
  release.join();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(to_text(got.value()), "v");
}

TEST_F(TcpStoreHardeningTest, StoreRefusesKeysBeyondItsCapacity) {
  server_.reset();
  start({.max_keys = 2});
  auto client = TcpStoreClient::connect({.host = "127.0.0.1", .port = port()});
  ASSERT_TRUE(client.ok());
  Store& s = *client.value();
  ASSERT_TRUE(s.set("a", to_bytes("1")).ok());
  ASSERT_TRUE(s.set("b", to_bytes("2")).ok());
  Status full = s.set("c", to_bytes("3"));
  EXPECT_EQ(full.code(), PG_ERR_STORE);
  EXPECT_THAT(full.message(), HasSubstr("full"));
  EXPECT_TRUE(s.set("a", to_bytes("overwrite is fine")).ok());
  EXPECT_TRUE(s.remove("b").value());
  EXPECT_TRUE(s.set("c", to_bytes("3")).ok());
}

}  // namespace
}  // namespace procgroup::detail
