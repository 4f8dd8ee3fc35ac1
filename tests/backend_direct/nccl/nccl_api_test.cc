// The nccl plugin through libprocgroup on a host without a CUDA device (CI): group
// creation fails promptly with PG_ERR_UNSUPPORTED and "no CUDA device: <CUDA's error>", on
// one rank in this process and on two ranks as processes over the loopback TCP store, and
// a gloo group created afterwards in the same process works.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "nccl_test_support.h"
#include "procgroup/procgroup.h"
#include "subprocess.h"

namespace procgroup::nccl_test {
namespace {

using procgroup::testing::ProcessResult;
using procgroup::testing::Subprocess;
using procgroup::testing::TempDir;

class NcclWithoutDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (cuda_device_count(&why) > 0) GTEST_SKIP() << "this host has a CUDA device";
  }
};

// A port nothing listens on right now (bound, read, released).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

TEST_F(NcclWithoutDevice, OneRankFailsPromptlyAndGlooStillWorks) {
  TempDir dir;
  const std::string store = "file://" + dir.str() + "/store";
  pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
  o.size = 1;
  o.backend = "nccl";
  o.store_url = store.c_str();
  o.timeout_ms = 60000;
  o.device_type = PG_DEVICE_CUDA;
  pg_group_t group = nullptr;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(pg_group_create(&o, &group), PG_ERR_UNSUPPORTED);
  const std::string message = pg_last_error();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10);
  EXPECT_NE(message.find("no CUDA device: "), std::string::npos) << message;
  EXPECT_NE(message.find("cudaError"), std::string::npos) << message;
  EXPECT_NE(message.find("nccl"), std::string::npos) << message;
  EXPECT_EQ(group, nullptr);

  o.backend = "gloo";
  o.name = "after";
  o.device_type = PG_DEVICE_CPU;
  ASSERT_EQ(pg_group_create(&o, &group), PG_OK) << pg_last_error();
  const char* name = nullptr;
  EXPECT_EQ(pg_group_backend_name(group, &name), PG_OK);
  EXPECT_STREQ(name, "gloo");
  double x[3] = {1, 2, 3};
  pg_buffer_t b = pg_buffer_cpu(x, 3, PG_DTYPE_F64);
  EXPECT_EQ(pg_allreduce(group, &b, &b, nullptr, nullptr), PG_OK) << pg_last_error();
  EXPECT_EQ(x[2], 3.0);
  EXPECT_EQ(pg_group_destroy(group), PG_OK);
}

TEST_F(NcclWithoutDevice, TwoRankProcessesOnLoopbackFailPromptly) {
  const int port = free_port();
  ASSERT_GT(port, 0);
  std::vector<std::unique_ptr<Subprocess>> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(std::make_unique<Subprocess>(
        std::vector<std::string>{PG_NCCL_PROBE_PATH},
        std::vector<std::string>{"RANK=" + std::to_string(r), "WORLD_SIZE=2",
                                 "LOCAL_RANK=" + std::to_string(r), "LOCAL_WORLD_SIZE=2",
                                 "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port),
                                 "PROCGROUP_BACKEND=", "PROCGROUP_TIMEOUT="}));
  }
  for (int r = 0; r < 2; ++r) {
    ProcessResult result = ranks[r]->wait(90);  // from each start: both outputs stay readable
    EXPECT_FALSE(result.timed_out) << "rank " << r;
    EXPECT_EQ(result.exit_code, 0) << "rank " << r << ": " << result.out << result.err;
    EXPECT_NE(result.out.find("gloo allreduce ok"), std::string::npos) << result.out;
  }
}

}  // namespace
}  // namespace procgroup::nccl_test
