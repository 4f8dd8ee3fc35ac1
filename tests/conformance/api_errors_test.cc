// Bad input at the C boundary: every case returns a status and a message naming what is
// wrong — never a crash, hang or silent success.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "procgroup/procgroup.h"

namespace {

// A single-rank loopback group: needs no store or peers.
class SingleRank : public ::testing::Test {
 protected:
  void SetUp() override {
    pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
    o.size = 1;
    o.backend = "loopback";
    ASSERT_EQ(pg_group_create(&o, &group_), PG_OK) << pg_last_error();
  }
  void TearDown() override { EXPECT_EQ(pg_group_destroy(group_), PG_OK) << pg_last_error(); }

  // Expects status and a message containing each fragment.
  static void expect_error(pg_status_t got, pg_status_t want, std::vector<std::string> fragments) {
    EXPECT_EQ(got, want) << pg_status_name(got) << ": " << pg_last_error();
    std::string message = pg_last_error();
    for (const auto& f : fragments) EXPECT_NE(message.find(f), std::string::npos) << message;
  }

  pg_group_t group_ = nullptr;
  float data_[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  pg_buffer_t buf_ = pg_buffer_cpu(data_, 4, PG_DTYPE_F32);
};

TEST(StatusNames, EveryStatusHasAName) {
  for (pg_status_t s = PG_OK; s <= PG_ERR_INTERNAL; ++s)
    EXPECT_STRNE(pg_status_name(s), "PG_UNKNOWN_STATUS") << s;
  EXPECT_STREQ(pg_status_name(PG_ERR_TIMEOUT), "PG_ERR_TIMEOUT");
  EXPECT_STREQ(pg_status_name(12345), "PG_UNKNOWN_STATUS");
  uint32_t major = 0, minor = 99;
  EXPECT_EQ(pg_get_version(&major, &minor), PG_OK);
  EXPECT_EQ(major, PG_ABI_VERSION_MAJOR);
  EXPECT_EQ(minor, PG_ABI_VERSION_MINOR);
  EXPECT_EQ(pg_get_version(nullptr, &minor), PG_ERR_INVALID_ARGUMENT);
}

TEST(GroupCreate, RejectsBadArguments) {
  pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
  o.size = 1;
  o.backend = "loopback";
  EXPECT_EQ(pg_group_create(&o, nullptr), PG_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pg_last_error()).find("out"), std::string::npos) << pg_last_error();

  pg_group_t g = nullptr;
  EXPECT_EQ(pg_group_create_versioned(2u << 16, &o, &g), PG_ERR_ABI_MISMATCH);
  EXPECT_NE(std::string(pg_last_error()).find("ABI 2.0"), std::string::npos) << pg_last_error();
  EXPECT_EQ(pg_group_create_versioned(PG_ABI_VERSION + 1, &o, &g), PG_ERR_ABI_MISMATCH);
  EXPECT_EQ(g, nullptr);

  pg_group_options_t small = o;
  small.struct_size = 8;
  EXPECT_EQ(pg_group_create(&small, &g), PG_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(pg_last_error()).find("struct_size"), std::string::npos);

  pg_group_options_t bad_rank = o;
  bad_rank.size = 2;
  bad_rank.rank = 2;
  EXPECT_EQ(pg_group_create(&bad_rank, &g), PG_ERR_INVALID_ARGUMENT) << pg_last_error();
}

TEST(GroupCreate, UnknownBackendListsWhereItLooked) {
  pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
  o.size = 1;
  o.backend = "nosuchbackend";
  pg_group_t g = nullptr;
  EXPECT_EQ(pg_group_create(&o, &g), PG_ERR_BACKEND_NOT_FOUND);
  std::string message = pg_last_error();
  EXPECT_NE(message.find("nosuchbackend"), std::string::npos) << message;
  EXPECT_NE(message.find("libprocgroup-nosuchbackend.so"), std::string::npos) << message;
  o.backend = "/nonexistent/libmine.so";
  EXPECT_EQ(pg_group_create(&o, &g), PG_ERR_BACKEND_NOT_FOUND) << pg_last_error();
}

TEST(GroupCreate, MissingEnvironmentNamesTheVariable) {
  for (const char* v : {"RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
                        "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"})
    unsetenv(v);
  pg_group_t g = nullptr;
  EXPECT_EQ(pg_group_create(nullptr, &g), PG_ERR_CONFIG);
  EXPECT_NE(std::string(pg_last_error()).find("RANK"), std::string::npos) << pg_last_error();
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "two", 1);
  EXPECT_EQ(pg_group_create(nullptr, &g), PG_ERR_CONFIG);
  EXPECT_NE(std::string(pg_last_error()).find("WORLD_SIZE"), std::string::npos) << pg_last_error();
}

TEST_F(SingleRank, QueriesWork) {
  int32_t rank = -1, size = -1;
  const char* name = nullptr;
  EXPECT_EQ(pg_group_rank(group_, &rank), PG_OK);
  EXPECT_EQ(pg_group_size(group_, &size), PG_OK);
  EXPECT_EQ(pg_group_backend_name(group_, &name), PG_OK);
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(size, 1);
  EXPECT_STREQ(name, "loopback");
  pg_capabilities_t caps = PG_CAPABILITIES_INIT;
  EXPECT_EQ(pg_group_capabilities(group_, &caps), PG_OK);
  EXPECT_TRUE(caps.native_ops & (1u << PG_OP_ALLREDUCE));
  EXPECT_TRUE(caps.devices & (1u << PG_DEVICE_CPU));
  EXPECT_EQ(pg_group_rank(nullptr, &rank), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(pg_group_rank(group_, nullptr), PG_ERR_INVALID_ARGUMENT);
  pg_capabilities_t small = PG_CAPABILITIES_INIT;
  small.struct_size = 4;
  EXPECT_EQ(pg_group_capabilities(group_, &small), PG_ERR_INVALID_ARGUMENT);
}

TEST_F(SingleRank, NullPointers) {
  expect_error(pg_allreduce(nullptr, nullptr, &buf_, nullptr, nullptr), PG_ERR_INVALID_ARGUMENT,
               {"group"});
  expect_error(pg_allreduce(group_, nullptr, nullptr, nullptr, nullptr), PG_ERR_INVALID_ARGUMENT,
               {"allreduce", "output"});
  expect_error(pg_reduce_scatter(group_, nullptr, &buf_, nullptr, nullptr), PG_ERR_INVALID_ARGUMENT,
               {"reduce_scatter", "input"});
  expect_error(pg_send(group_, nullptr, nullptr, nullptr), PG_ERR_INVALID_ARGUMENT, {"send"});
  expect_error(pg_work_test(nullptr), PG_ERR_INVALID_ARGUMENT, {"work"});
  expect_error(pg_work_wait(nullptr, 0), PG_ERR_INVALID_ARGUMENT, {"work"});
  EXPECT_EQ(pg_work_release(nullptr), PG_OK);
  EXPECT_EQ(pg_group_destroy(nullptr), PG_OK);
}

TEST_F(SingleRank, BadBuffers) {
  pg_buffer_t b = buf_;
  b.struct_size = 0;
  expect_error(pg_allreduce(group_, nullptr, &b, nullptr, nullptr), PG_ERR_INVALID_ARGUMENT,
               {"struct_size", "PG_BUFFER_INIT"});
  b = buf_;
  b.dtype = PG_DTYPE_INVALID;
  expect_error(pg_allreduce(group_, nullptr, &b, nullptr, nullptr), PG_ERR_INVALID_ARGUMENT,
               {"dtype"});
  b = buf_;
  b.data = nullptr;
  expect_error(pg_allreduce(group_, nullptr, &b, nullptr, nullptr), PG_ERR_INVALID_ARGUMENT,
               {"NULL", "count is 4"});
  b = buf_;
  b.device_type = 7;
  expect_error(pg_allreduce(group_, nullptr, &b, nullptr, nullptr), PG_ERR_INVALID_ARGUMENT,
               {"device"});
  b = buf_;
  b.device_type = PG_DEVICE_CUDA;
  expect_error(pg_allreduce(group_, nullptr, &b, nullptr, nullptr), PG_ERR_UNSUPPORTED,
               {"loopback", "cuda", "nccl"});
}

TEST_F(SingleRank, MismatchedShapesAndOverlap) {
  pg_buffer_t in = pg_buffer_cpu(data_, 3, PG_DTYPE_F32);
  pg_buffer_t out = pg_buffer_cpu(data_ + 4, 4, PG_DTYPE_F32);
  expect_error(pg_allreduce(group_, &in, &out, nullptr, nullptr), PG_ERR_INVALID_ARGUMENT,
               {"input count is 3", "4"});
  pg_buffer_t in_i32 = pg_buffer_cpu(data_, 4, PG_DTYPE_I32);
  expect_error(pg_allreduce(group_, &in_i32, &out, nullptr, nullptr), PG_ERR_INVALID_ARGUMENT,
               {"dtype"});
  pg_buffer_t shifted = pg_buffer_cpu(data_ + 1, 4, PG_DTYPE_F32);
  expect_error(pg_allreduce(group_, &buf_, &shifted, nullptr, nullptr), PG_ERR_INVALID_ARGUMENT,
               {"overlap"});
  pg_buffer_t big_in = pg_buffer_cpu(data_, 4, PG_DTYPE_F32);
  pg_buffer_t small_out = pg_buffer_cpu(data_ + 4, 3, PG_DTYPE_F32);
  expect_error(pg_reduce_scatter(group_, &big_in, &small_out, nullptr, nullptr),
               PG_ERR_INVALID_ARGUMENT, {"input count is 4", "3"});
}

TEST_F(SingleRank, BadOptions) {
  pg_op_options_t o = PG_OP_OPTIONS_INIT;
  o.root = 1;
  expect_error(pg_broadcast(group_, nullptr, &buf_, &o, nullptr), PG_ERR_INVALID_ARGUMENT,
               {"root 1"});
  o = PG_OP_OPTIONS_INIT;
  o.reduce_op = 17;
  expect_error(pg_allreduce(group_, nullptr, &buf_, &o, nullptr), PG_ERR_INVALID_ARGUMENT,
               {"reduce op 17"});
  o = PG_OP_OPTIONS_INIT;
  o.tag = -1;
  expect_error(pg_send(group_, &buf_, &o, nullptr), PG_ERR_INVALID_ARGUMENT, {"tag -1"});
  o = PG_OP_OPTIONS_INIT;
  o.peer = 3;
  expect_error(pg_recv(group_, &buf_, &o, nullptr), PG_ERR_INVALID_ARGUMENT, {"peer 3"});
  o = PG_OP_OPTIONS_INIT;
  o.timeout_ms = -5;
  expect_error(pg_barrier(group_, &o, nullptr), PG_ERR_INVALID_ARGUMENT, {"timeout"});
  o = PG_OP_OPTIONS_INIT;
  o.struct_size = 3;
  expect_error(pg_barrier(group_, &o, nullptr), PG_ERR_INVALID_ARGUMENT,
               {"struct_size", "PG_OP_OPTIONS_INIT"});
}

TEST_F(SingleRank, SingleRankOperationsAreIdentities) {
  ASSERT_EQ(pg_allreduce(group_, nullptr, &buf_, nullptr, nullptr), PG_OK) << pg_last_error();
  EXPECT_EQ(data_[3], 4.0f);
  pg_op_options_t o = PG_OP_OPTIONS_INIT;
  o.reduce_op = PG_REDUCE_AVG;
  pg_work_t w = nullptr;
  ASSERT_EQ(pg_allreduce(group_, nullptr, &buf_, &o, &w), PG_OK) << pg_last_error();
  EXPECT_EQ(pg_work_wait(w, -1), PG_OK) << pg_last_error();
  EXPECT_EQ(pg_work_test(w), PG_OK);
  EXPECT_EQ(pg_work_release(w), PG_OK);
  EXPECT_EQ(data_[2], 3.0f);
  EXPECT_EQ(pg_barrier(group_, nullptr, nullptr), PG_OK) << pg_last_error();
}

TEST_F(SingleRank, AbortFailsLaterCallsFast) {
  ASSERT_EQ(pg_group_abort(group_), PG_OK);
  expect_error(pg_allreduce(group_, nullptr, &buf_, nullptr, nullptr), PG_ERR_ABORTED,
               {"aborted by the user"});
  EXPECT_EQ(pg_group_abort(nullptr), PG_ERR_INVALID_ARGUMENT);
}

}  // namespace
