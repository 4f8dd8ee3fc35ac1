// A backend that takes device buffers only (nccl) through the core: barrier, split and the
// PROCGROUP_DEBUG=detail fingerprints must not need a CPU collective. The backend here is
// the loopback plugin behind the conformance mask plugin in its device-only mode (it
// declares CUDA buffers only and runs them as host memory), so this runs without a GPU.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "thread_group.h"

namespace pgtest {
namespace {

class DeviceOnlyBackend : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setenv("PGCONF_MASK_INNER", PG_LOOPBACK_PATH, 1);
    setenv("PGCONF_MASK_DEVICE_ONLY", "1", 1);
  }
  void TearDown() override { unsetenv("PROCGROUP_DEBUG"); }
};

// "Device memory" for the stand-in backend: host memory labelled cuda:0.
template <class T>
pg_buffer_t device_buffer(T* data, uint64_t count, pg_dtype_t dtype) {
  pg_buffer_t b = pg_buffer_cpu(data, count, dtype);
  b.device_type = PG_DEVICE_CUDA;
  return b;
}

TEST_F(DeviceOnlyBackend, DeclaresCudaOnlyAndRefusesCpuBuffers) {
  run_thread_ranks(PG_MASK_PLUGIN_PATH, 2, [](pg_group_t g, int) {
    pg_capabilities_t caps = PG_CAPABILITIES_INIT;
    ASSERT_EQ(pg_group_capabilities(g, &caps), PG_OK);
    EXPECT_EQ(caps.devices, 1u << PG_DEVICE_CUDA);
    float x = 1;
    pg_buffer_t cpu = pg_buffer_cpu(&x, 1, PG_DTYPE_F32);
    EXPECT_EQ(pg_allreduce(g, nullptr, &cpu, nullptr, nullptr), PG_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(pg_last_error()).find("does not handle cpu buffers"), std::string::npos)
        << pg_last_error();
  });
}

TEST_F(DeviceOnlyBackend, BarrierNeedsNoCpuBuffer) {
  run_thread_ranks(PG_MASK_PLUGIN_PATH, 3, [](pg_group_t g, int) {
    for (int i = 0; i < 3; ++i) EXPECT_EQ(pg_barrier(g, nullptr, nullptr), PG_OK) << pg_last_error();
  });
}

TEST_F(DeviceOnlyBackend, SplitExchangesColorsThroughTheStore) {
  run_thread_ranks(PG_MASK_PLUGIN_PATH, 4, [](pg_group_t g, int rank) {
    pg_group_t sub = nullptr;
    // Odd ranks first by key, so the child's order is not the parent's.
    ASSERT_EQ(pg_group_split(g, rank % 2, -rank, &sub), PG_OK) << pg_last_error();
    int32_t sub_rank = -1, sub_size = 0;
    pg_group_rank(sub, &sub_rank);
    pg_group_size(sub, &sub_size);
    EXPECT_EQ(sub_size, 2);
    EXPECT_EQ(sub_rank, rank < 2 ? 1 : 0);
    int32_t x = rank;
    pg_buffer_t b = device_buffer(&x, 1, PG_DTYPE_I32);
    ASSERT_EQ(pg_allreduce(sub, nullptr, &b, nullptr, nullptr), PG_OK) << pg_last_error();
    EXPECT_EQ(x, rank % 2 == 0 ? 0 + 2 : 1 + 3);
    // A second split reuses nothing of the first one's exchange.
    pg_group_t again = nullptr;
    ASSERT_EQ(pg_group_split(g, rank == 3 ? PG_SPLIT_NO_COLOR : 0, 0, &again), PG_OK)
        << pg_last_error();
    EXPECT_EQ(again == nullptr, rank == 3);
    if (again != nullptr) pg_group_destroy(again);
    pg_group_destroy(sub);
  });
}

TEST_F(DeviceOnlyBackend, DebugFingerprintsTravelThroughTheStore) {
  setenv("PROCGROUP_DEBUG", "detail", 1);
  run_thread_ranks(PG_MASK_PLUGIN_PATH, 2, [](pg_group_t g, int rank) {
    float x[4] = {1, 2, 3, 4};
    pg_buffer_t b = device_buffer(x, 4, PG_DTYPE_F32);
    // More rounds than the store keeps keys for: old rounds are removed as they go.
    for (int i = 0; i < 5; ++i) {
      ASSERT_EQ(pg_allreduce(g, nullptr, &b, nullptr, nullptr), PG_OK) << pg_last_error();
      ASSERT_EQ(pg_barrier(g, nullptr, nullptr), PG_OK) << pg_last_error();
    }
    EXPECT_EQ(x[3], 4.0f * 32);
    pg_status_t s = rank == 0 ? pg_allreduce(g, nullptr, &b, nullptr, nullptr)
                              : pg_broadcast(g, nullptr, &b, nullptr, nullptr);
    EXPECT_EQ(s, PG_ERR_MISMATCH) << pg_status_name(s) << ": " << pg_last_error();
    EXPECT_STREQ(pg_last_error(),
                 "rank 1 called broadcast(f32, 4, root=0, cuda) as op #11 while rank 0 called "
                 "allreduce(f32, 4, sum, cuda)");
  });
}

}  // namespace
}  // namespace pgtest
