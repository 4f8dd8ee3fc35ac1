// The TCP store's server, hosted by rank 0: one event-loop thread (epoll) serving every
// client connection, speaking store_protocol.h. A slow, stalled or malicious client is
// answered with an error and closed; it never holds up the others.
//
//   PG_ASSIGN_OR_RETURN(auto server, TcpStoreServer::start({.host = "127.0.0.1", .port = 0}));
//   int port = server->port();   // the bound port (ephemeral when asked for port 0)
//   // ... clients connect; the destructor stops the loop and closes every connection.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "common/status.h"
#include "store/store_protocol.h"

namespace procgroup::detail {

struct TcpStoreServerOptions {
  std::string host{};   // bound to this host's addresses only (name, IPv4 or IPv6)
  int port = 0;         // 0: an ephemeral port
  std::string token{};  // non-empty: clients must authenticate (store_auth.h)
  // Limits; tests lower them.
  size_t max_connections = kMaxConnections;
  size_t max_keys = kMaxStoredKeys;
  size_t max_bytes = kDefaultMaxStoreBytes;  // keys + values held + frames being received
  Millis auth_timeout = kAuthTimeout;        // to authenticate, or (no token) to send a request
  Millis stalled_frame_timeout = kStalledFrameTimeout;
};

class TcpStoreServer {
 public:
  // Binds and listens on the caller's thread (so a port in use is reported here, as
  // PG_ERR_STORE), then starts the loop thread.
  static Result<std::unique_ptr<TcpStoreServer>> start(TcpStoreServerOptions options);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int port() const { return port_; }
  const std::string& host() const { return host_; }

  class Loop;  // the event loop's state, owned here and run on thread_

 private:
  TcpStoreServer() = default;
  std::string host_;
  int port_ = 0;
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

}  // namespace procgroup::detail
