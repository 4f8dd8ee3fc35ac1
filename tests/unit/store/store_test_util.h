// Helpers for the store tests: private temporary directories, raw protocol connections
// for poking at the TCP server, and child processes bounded by a timeout.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "store/socket_util.h"
#include "store/store_auth.h"
#include "store/store_protocol.h"

namespace procgroup::detail::store_testing {

// A fresh directory (mkdtemp under $TMPDIR or /tmp), removed with its contents.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

Bytes to_bytes(std::string_view s);
std::string to_text(const Bytes& b);

// A plain TCP connection to 127.0.0.1:port that speaks raw bytes.
class RawConnection {
 public:
  explicit RawConnection(int port);
  bool connected() const { return fd_.valid(); }
  bool send(std::span<const uint8_t> data);
  bool send(std::string_view data) { return send(as_bytes(data)); }
  // The next frame's body (opcode first); nullopt on EOF, error or timeout.
  std::optional<Bytes> read_frame(Millis timeout = Millis(5000));
  // Reads HELLO; returns its nonce (and whether authentication is required).
  std::optional<Nonce> read_hello(bool* auth_required = nullptr);
  // True when the peer closes (EOF or reset) within timeout; data before it is discarded.
  bool wait_closed(Millis timeout = Millis(5000));
  void shutdown_write();
  void close() { fd_.reset(); }

 private:
  UniqueFd fd_;
};

// An ERROR frame body's code and message, or nullopt if body is not an ERROR.
std::optional<std::pair<pg_status_t, std::string>> as_error(const Bytes& body);

// Runs body in a forked child (which must not use gtest) and returns its exit code, or -1
// if it crashed or ran past timeout (then it is killed).
class Child {
 public:
  explicit Child(const std::function<int()>& body);
  ~Child();
  int wait(Millis timeout);

 private:
  pid_t pid_ = -1;
};

}  // namespace procgroup::detail::store_testing
