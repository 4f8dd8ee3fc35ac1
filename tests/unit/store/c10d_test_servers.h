// Servers for the c10d store client tests (c10d_store_test.cc).
//
// TorchStoreServer runs a REAL torch TCPStore (torch_store_server.py under TORCH_PYTHON, by
// default Debian's /usr/bin/python3 with python3-torch) in a child process, and relays
// commands to torch's own client so the tests can see what torch sees.
//
// FakeC10dServer stands in for torch >= 2.3's servers, which cannot be installed here: the
// validated numbering (VALIDATE=0 first on every connection, SET=1 ... WAIT=6,
// DELETE_KEY=8), and what each of torch's servers does with a first query that is not
// VALIDATE (read in their sources): the classic server closes the connection, the libuv
// server leaves it unanswered until the client's EOF.
//
//   TorchStoreServer torch;
//   ASSERT_NE(torch.port(), 0) << torch.error();
//   EXPECT_EQ(torch.command(R"({"op": "get", "prefix": "", "key": "k"})"), ...);
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "store/socket_util.h"
#include "store/store.h"

namespace procgroup::detail::store_testing {

class TorchStoreServer {
 public:
  // Empty when TORCH_PYTHON imports torch.distributed; else why not (for GTEST_SKIP).
  static const std::string& unavailable();

  TorchStoreServer();   // starts it; port() is 0 on failure and error() says why
  ~TorchStoreServer();  // stop()s it, killing it if it lingers
  TorchStoreServer(const TorchStoreServer&) = delete;
  TorchStoreServer& operator=(const TorchStoreServer&) = delete;

  int port() const { return port_; }
  const std::string& version() const { return version_; }  // torch's, e.g. "1.13.0a0"
  const std::string& error() const { return error_; }
  // One JSON command (torch_store_server.py); its JSON reply, or "" after timeout.
  std::string command(const std::string& json, Millis timeout = Millis(20000));
  // Closes its stdin and waits for it to exit: the store is gone afterwards.
  void stop();

 private:
  std::string read_line(Deadline deadline);

  pid_t pid_ = -1;
  UniqueFd to_child_;
  UniqueFd from_child_;
  std::string pending_;
  int port_ = 0;
  std::string version_;
  std::string error_;
};

class FakeC10dServer {
 public:
  enum class Flavor { kClassic, kLibuv };
  explicit FakeC10dServer(Flavor flavor);
  ~FakeC10dServer();  // stops and joins every thread
  FakeC10dServer(const FakeC10dServer&) = delete;
  FakeC10dServer& operator=(const FakeC10dServer&) = delete;

  int port() const { return port_; }
  // Connections dropped because their first query was not VALIDATE.
  int unvalidated() const { return unvalidated_; }

 private:
  void accept_loop();
  void serve(int fd);
  // Reads exactly n bytes, giving up when the peer closes or the server stops.
  bool read(int fd, void* out, size_t n);
  bool read_str(int fd, std::string* out);
  bool write(int fd, const Bytes& data);

  Flavor flavor_;
  UniqueFd listener_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> unvalidated_{0};
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, std::string> data_;  // guarded by mu_
  std::vector<std::thread> threads_;         // guarded by mu_
  std::thread acceptor_;
};

}  // namespace procgroup::detail::store_testing
