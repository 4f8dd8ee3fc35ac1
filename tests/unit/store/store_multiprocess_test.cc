// add() from several forked processes at once, through the TCP store and the file store:
// every process reports the totals it saw, and together they must be exactly 1..N, which
// only holds if each add is atomic across processes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <numeric>
#include <thread>
#include <vector>

#include "store/file_store.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"
#include "store_test_util.h"

namespace procgroup::detail {
namespace {

using store_testing::Child;
using store_testing::TempDir;

constexpr int kProcesses = 4;
constexpr int kAddsEach = 100;

// Both ends of a pipe, closed on destruction.
struct Pipe {
  Pipe() {
    int fds[2];
    if (::pipe(fds) == 0) {
      read_end.reset(fds[0]);
      write_end.reset(fds[1]);
    }
  }
  UniqueFd read_end;
  UniqueFd write_end;
};

// In a child: kAddsEach adds of 1, each result written to out (8-byte writes are atomic
// on a pipe). Returns the child's exit code.
int add_and_report(Store& store, int out) {
  for (int i = 0; i < kAddsEach; ++i) {
    auto v = store.add("total", 1);
    if (!v.ok()) return 3;
    int64_t value = v.value();
    if (::write(out, &value, sizeof value) != sizeof value) return 4;
  }
  return 0;
}

// Reads every reported total once the children have exited and checks they are 1..N.
void expect_distinct_totals(int in) {
  std::vector<int64_t> seen;
  int64_t value = 0;
  while (::read(in, &value, sizeof value) == sizeof value) seen.push_back(value);
  std::sort(seen.begin(), seen.end());
  std::vector<int64_t> expected(kProcesses * kAddsEach);
  std::iota(expected.begin(), expected.end(), 1);
  EXPECT_EQ(seen, expected);
}

TEST(StoreMultiprocessTest, TcpAddFromForkedProcessesIsAtomic) {
  Pipe port_pipe;
  Pipe results;
  // Fork before the server's thread exists; the children learn the port through a pipe.
  std::vector<std::unique_ptr<Child>> children;
  for (int i = 0; i < kProcesses; ++i) {
    int port_in = port_pipe.read_end.get();
    int out = results.write_end.get();
    children.push_back(std::make_unique<Child>([port_in, out] {
      int port = 0;
      if (::read(port_in, &port, sizeof port) != sizeof port) return 2;
      auto client =
          TcpStoreClient::connect({.host = "127.0.0.1", .port = port, .timeout = Millis(10000)});
      if (!client.ok()) return 5;
      return add_and_report(*client.value(), out);
    }));
  }
  auto server = TcpStoreServer::start({.host = "127.0.0.1", .port = 0});
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  int port = server.value()->port();
  for (int i = 0; i < kProcesses; ++i) {
    ASSERT_EQ(::write(port_pipe.write_end.get(), &port, sizeof port), sizeof port);
  }
  for (auto& child : children) EXPECT_EQ(child->wait(Millis(30000)), 0);
  results.write_end.reset();
  expect_distinct_totals(results.read_end.get());
  auto client = TcpStoreClient::connect({.host = "127.0.0.1", .port = port});
  ASSERT_TRUE(client.ok());
  EXPECT_EQ(client.value()->add("total", 0).value(), kProcesses * kAddsEach);
}

TEST(StoreMultiprocessTest, FileAddFromForkedProcessesIsAtomic) {
  TempDir dir;
  std::string path = dir.path() + "/shared";
  Pipe results;
  std::vector<std::unique_ptr<Child>> children;
  for (int i = 0; i < kProcesses; ++i) {
    int out = results.write_end.get();
    children.push_back(std::make_unique<Child>([path, out] {
      auto store = FileStore::open(path, Millis(10000));
      if (!store.ok()) return 5;
      return add_and_report(*store.value(), out);
    }));
  }
  for (auto& child : children) EXPECT_EQ(child->wait(Millis(30000)), 0);
  results.write_end.reset();
  expect_distinct_totals(results.read_end.get());
  auto store = FileStore::open(path, Millis(1000));
  ASSERT_TRUE(store.ok());
  EXPECT_EQ(store.value()->add("total", 0).value(), kProcesses * kAddsEach);
}

TEST(StoreMultiprocessTest, FileStoreGetWaitsForAnotherProcess) {
  TempDir dir;
  std::string path = dir.path() + "/shared";
  Child writer([path] {
    auto store = FileStore::open(path, Millis(10000));
    if (!store.ok()) return 5;
    std::this_thread::sleep_for(Millis(100));
    Bytes v = {'h', 'i'};
    return store.value()->set("greeting", v).ok() ? 0 : 6;
  });
  auto store = FileStore::open(path, Millis(5000));
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  auto v = store.value()->get("greeting", Millis(10000));
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(store_testing::to_text(v.value()), "hi");
  EXPECT_EQ(writer.wait(Millis(10000)), 0);
}

}  // namespace
}  // namespace procgroup::detail
