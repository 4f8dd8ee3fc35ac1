// A client of the TCP store (tcp_store_server.h). Thread-safe: each call borrows a
// connection from a small pool (opening another when all are busy), so a get() waiting on
// one thread never blocks a set() on another. Every read and write is bounded by a
// deadline; errors name the store's host:port and the key.
//
//   PG_ASSIGN_OR_RETURN(auto store, TcpStoreClient::connect({.host = "10.0.0.1",
//                                                            .port = 29500,
//                                                            .timeout = Millis(30000)}));
//   PG_ASSIGN_OR_RETURN(Bytes v, store->get("addr/0", Millis(30000)));
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "store/socket_util.h"
#include "store/store.h"
#include "store/store_protocol.h"

namespace procgroup::detail {

struct TcpStoreClientOptions {
  std::string host{};
  int port = 0;
  std::string token{};     // empty: expect a store without authentication
  Millis timeout{300000};  // connecting (retried: rank 0 may start later) and each request
};

class TcpStoreClient final : public Store {
 public:
  // Connects and authenticates, retrying with backoff until options.timeout. A wrong or
  // missing token fails at once with PG_ERR_AUTH.
  static Result<std::unique_ptr<TcpStoreClient>> connect(TcpStoreClientOptions options);

  Status set(std::string_view key, std::span<const uint8_t> value) override;
  Result<Bytes> get(std::string_view key, Millis timeout) override;
  Result<int64_t> add(std::string_view key, int64_t delta) override;
  Result<Bytes> compare_set(std::string_view key, std::span<const uint8_t> expected,
                            std::span<const uint8_t> desired) override;
  Result<bool> remove(std::string_view key) override;
  Status wait(std::span<const std::string> keys, Millis timeout) override;
  Result<bool> check(std::span<const std::string> keys) override;

  // "host:port" as used in messages.
  const std::string& endpoint() const { return endpoint_; }

 private:
  struct Reply {
    Op op;
    Bytes body;  // the frame body after the opcode
  };

  explicit TcpStoreClient(TcpStoreClientOptions options);
  // One connection, retried with backoff until deadline; *fatal for errors retrying
  // cannot fix (authentication, not a procgroup store).
  Result<UniqueFd> open_connection(Deadline deadline);
  Result<UniqueFd> try_connect(Deadline deadline, bool* fatal);
  Status handshake(int fd, Deadline deadline, bool* fatal);
  // Sends request and reads the reply on a pooled connection. An ERROR reply becomes a
  // Status; anything else must be `expect`.
  Result<Reply> call(std::string_view what, const Bytes& request, Op expect, Deadline deadline);
  Status fail(std::string_view what, const Status& cause) const;

  TcpStoreClientOptions options_;
  std::string endpoint_;
  // Set by connect() once it got in: a refusal after that means the server went away, which
  // waiting cannot fix (a slow or busy server accepts connections, or refuses with ERROR).
  bool established_ = false;
  static constexpr size_t kMaxIdleConnections = 4;
  IdleConnections idle_{kMaxIdleConnections};
};

}  // namespace procgroup::detail
