// The nccl backend on real CUDA devices through libprocgroup (label gpu), what is its own:
// stream ordering; host memory refused; timeout and abort; send/recv; barrier and
// subgroups (ncclCommSplit), ranks as threads of one process. The results of every op x
// dtype x reduce op are judged by the conformance suite (conformance_test --device cuda,
// ctest Cuda/Collectives.*). Without a device every test skips with "no CUDA device:
// <CUDA's error>".
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "nccl_gpu_support.h"
#include "nccl_test_support.h"
#include "subprocess.h"

namespace procgroup::nccl_test {
namespace {

using procgroup::testing::TempDir;

class NcclGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    devices_ = cuda_device_count(&why);
    if (devices_ == 0) GTEST_SKIP() << why;
  }
  int devices_ = 0;
  TempDir dir_;
};

TEST_F(NcclGpu, OperationStartsAfterTheCallersStream) {
  auto groups = make_groups(1, dir_.str());
  ASSERT_EQ(groups.size(), 1u);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  constexpr size_t kBusy = size_t{512} << 20, kN = 1 << 16;
  void* busy = nullptr;
  float* pinned = nullptr;
  ASSERT_EQ(cudaMalloc(&busy, kBusy), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), kN * sizeof(float)), cudaSuccess);
  std::fill(pinned, pinned + kN, 5.0f);
  DeviceBuffer in(PG_DTYPE_F32, kN, 0), out(PG_DTYPE_F32, kN, 0);
  in.upload(std::vector<double>(kN, 0));
  out.upload(std::vector<double>(kN, 0));
  // The stream is busy, then writes the input: an op that ignored it would see zeros.
  ASSERT_EQ(cudaMemsetAsync(busy, 1, kBusy, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(in.data(), pinned, kN * sizeof(float), cudaMemcpyHostToDevice, s),
            cudaSuccess);
  const pg_buffer_t ib = in.buffer(s), ob = out.buffer(s);
  pg_work_t w = nullptr;
  ASSERT_EQ(pg_allreduce(groups[0], &ib, &ob, nullptr, &w), PG_OK) << pg_last_error();
  ASSERT_EQ(pg_work_wait(w, -1), PG_OK) << pg_last_error();
  pg_work_release(w);
  const std::vector<double> got = out.download();  // legacy stream: after the wait, visible
  EXPECT_EQ(std::count(got.begin(), got.end(), 5.0), static_cast<long>(kN));
  EXPECT_EQ(pg_group_destroy(groups[0]), PG_OK);
  cudaFree(busy);
  cudaFreeHost(pinned);
  cudaStreamDestroy(s);
}

TEST_F(NcclGpu, HostMemoryAndOtherDevicesAreRefused) {
  auto groups = make_groups(1, dir_.str());
  ASSERT_EQ(groups.size(), 1u);
  float* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), 16 * sizeof(float)), cudaSuccess);
  std::vector<float> pageable(16);
  DeviceBuffer d(PG_DTYPE_F32, 16, 0);
  struct Case {
    void* data;
    int32_t device_type, device_index;
    pg_status_t want;
    const char* words;
  };
  const Case cases[] = {
      {pinned, PG_DEVICE_CUDA, 0, PG_ERR_INVALID_ARGUMENT, "pinned host memory"},
      {pageable.data(), PG_DEVICE_CUDA, 0, PG_ERR_INVALID_ARGUMENT, "not device memory"},
      {d.data(), PG_DEVICE_CUDA, 1, PG_ERR_INVALID_ARGUMENT, "cuda:1"},
      // The core refuses first, from the devices the plugin declared (the plugin's own
      // words for this case are nccl_direct_test's, which calls it without the core).
      {pageable.data(), PG_DEVICE_CPU, 0, PG_ERR_UNSUPPORTED,
       "backend 'nccl' does not handle cpu buffers"},
  };
  for (const Case& c : cases) {
    pg_buffer_t b = d.buffer();
    b.data = c.data;
    b.device_type = c.device_type;
    b.device_index = c.device_index;
    EXPECT_EQ(pg_allreduce(groups[0], &b, &b, nullptr, nullptr), c.want) << c.words;
    EXPECT_NE(std::string(pg_last_error()).find(c.words), std::string::npos) << pg_last_error();
  }
  EXPECT_EQ(pg_group_destroy(groups[0]), PG_OK) << pg_last_error();
  cudaFreeHost(pinned);
}

TEST_F(NcclGpu, SendAndRecvToItself) {
  auto groups = make_groups(1, dir_.str());
  ASSERT_EQ(groups.size(), 1u);
  DeviceBuffer a(PG_DTYPE_I64, 100, 0), b(PG_DTYPE_I64, 100, 0);
  std::vector<double> values(100);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i) * 3;
  a.upload(values);
  pg_op_options_t o = PG_OP_OPTIONS_INIT;
  o.peer = 0;
  const pg_buffer_t ab = a.buffer(), bb = b.buffer();
  pg_work_t send = nullptr, recv = nullptr;
  ASSERT_EQ(pg_send(groups[0], &ab, &o, &send), PG_OK) << pg_last_error();
  ASSERT_EQ(pg_recv(groups[0], &bb, &o, &recv), PG_OK) << pg_last_error();
  EXPECT_EQ(pg_work_wait(recv, -1), PG_OK) << pg_last_error();  // issues both in one group
  EXPECT_EQ(pg_work_wait(send, -1), PG_OK) << pg_last_error();
  pg_work_release(send);
  pg_work_release(recv);
  EXPECT_EQ(b.download(), values);
  EXPECT_EQ(pg_group_destroy(groups[0]), PG_OK);
}

// A send to itself with no recv never matches: the deterministic hang of one GPU.
// NCCL 2.28 refuses a send to itself without a matching recv at ncclGroupEnd (invalid
// usage), so the send fails at once with NCCL's words; older NCCL never completes it and the
// operation's timeout ends it. Either way the communicator is aborted afterwards.
TEST_F(NcclGpu, UnmatchedSendToItselfFailsAndAbortsTheCommunicator) {
  auto groups = make_groups(1, dir_.str());
  ASSERT_EQ(groups.size(), 1u);
  DeviceBuffer a(PG_DTYPE_F32, 1000, 0);
  pg_op_options_t o = PG_OP_OPTIONS_INIT;
  o.timeout_ms = 2000;
  const pg_buffer_t ab = a.buffer();
  const auto start = std::chrono::steady_clock::now();
  const pg_status_t st = pg_send(groups[0], &ab, &o, nullptr);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string message = pg_last_error();
  EXPECT_NE(message.find("send to rank 0"), std::string::npos) << message;
  if (st == PG_ERR_TIMEOUT) {
    EXPECT_GE(seconds, 1.5) << message;
  } else {
    EXPECT_EQ(st, PG_ERR_INVALID_ARGUMENT) << message;
    EXPECT_NE(message.find("ncclGroupEnd"), std::string::npos) << message;
    EXPECT_NE(message.find("invalid usage"), std::string::npos) << message;
    EXPECT_LT(seconds, 1.5) << message;
  }
  EXPECT_LT(seconds, 15);
  const pg_buffer_t later = a.buffer();
  EXPECT_EQ(pg_allreduce(groups[0], &later, &later, nullptr, nullptr), PG_ERR_ABORTED);
  pg_group_destroy(groups[0]);
}

// A host function holds the caller's stream, so the allreduce behind it stays pending on
// the device until the abort ends the wait (the stream is released afterwards).
void CUDART_CB hold_stream(void* flag) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!static_cast<std::atomic<bool>*>(flag)->load() &&
         std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

TEST_F(NcclGpu, AbortEndsAPendingWait) {
  auto groups = make_groups(1, dir_.str());
  ASSERT_EQ(groups.size(), 1u);
  DeviceBuffer a(PG_DTYPE_F32, 1000, 0);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  std::atomic<bool> release{false};
  ASSERT_EQ(cudaLaunchHostFunc(stream, hold_stream, &release), cudaSuccess);
  const pg_buffer_t ab = a.buffer(stream);
  pg_work_t w = nullptr;
  ASSERT_EQ(pg_allreduce(groups[0], &ab, &ab, nullptr, &w), PG_OK) << pg_last_error();
  std::thread watchdog([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    EXPECT_EQ(pg_work_test(w), PG_PENDING) << "the stream is held: nothing can have run";
    EXPECT_EQ(pg_group_abort(groups[0]), PG_OK);
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(pg_work_wait(w, -1), PG_ERR_ABORTED) << pg_last_error();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 15);
  watchdog.join();
  release.store(true);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  pg_work_release(w);
  pg_group_destroy(groups[0]);
  cudaStreamDestroy(stream);
}

// Needs the core to route a barrier without a CPU buffer to a CUDA-only backend.
TEST_F(NcclGpu, Barrier) {
  auto groups = make_groups(1, dir_.str());
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(pg_barrier(groups[0], nullptr, nullptr), PG_OK) << pg_last_error();
  EXPECT_EQ(pg_group_destroy(groups[0]), PG_OK);
}

// An f32 allreduce (sum) of rank + 1 on group g, on this rank's device: "" when it gave
// the sum of member + 1 over `members` (world ranks).
std::string sum_of_members(pg_group_t g, int rank, const std::vector<int>& members) {
  DeviceBuffer b(PG_DTYPE_F32, 7, rank);
  b.upload(std::vector<double>(7, rank + 1.0));
  const pg_buffer_t bb = b.buffer();
  if (pg_allreduce(g, nullptr, &bb, nullptr, nullptr) != PG_OK) return pg_last_error();
  double want = 0;
  for (int m : members) want += m + 1.0;
  const std::vector<double> got = b.download();
  return got.front() == want && got.back() == want
             ? ""
             : "allreduce gave " + std::to_string(got.front());
}

// Needs the core to exchange split colours without a CPU collective on a CUDA-only backend.
TEST_F(NcclGpu, SubgroupBySplit) {
  auto groups = make_groups(1, dir_.str());
  ASSERT_EQ(groups.size(), 1u);
  pg_group_t child = nullptr;
  ASSERT_EQ(pg_group_split(groups[0], 0, 0, &child), PG_OK) << pg_last_error();
  EXPECT_EQ(sum_of_members(child, 0, {0}), "");
  EXPECT_EQ(pg_group_destroy(child), PG_OK);
  EXPECT_EQ(pg_group_destroy(groups[0]), PG_OK);
}

// pg_group_split through group_split (ncclCommSplit): every rank of the parent takes part,
// the last one with PG_SPLIT_NO_COLOR when there are three or more; key -rank reverses the
// order within a color; each child sums its own members only, splits again, and the
// parent still works afterwards.
TEST_F(NcclGpu, SplitUsesNcclCommSplitOverTheParent) {
  const int size = std::min(devices_, 4);
  auto groups = make_groups(size, dir_.str());
  ASSERT_EQ(groups.size(), static_cast<size_t>(size));
  auto opts_out = [&](int r) { return size >= 3 && r == size - 1; };
  on_ranks(size, [&](int rank) {
    pg_group_t child = nullptr;
    const int32_t color = opts_out(rank) ? PG_SPLIT_NO_COLOR : rank % 2;
    ASSERT_EQ(pg_group_split(groups[rank], color, -rank, &child), PG_OK) << pg_last_error();
    if (opts_out(rank)) {
      EXPECT_EQ(child, nullptr);
    } else {
      ASSERT_NE(child, nullptr);
      std::vector<int> members;  // in child order: descending world rank
      for (int r = size - 1; r >= 0; --r)
        if (!opts_out(r) && r % 2 == color) members.push_back(r);
      int32_t sub_rank = -1, sub_size = -1;
      pg_group_rank(child, &sub_rank);
      pg_group_size(child, &sub_size);
      EXPECT_EQ(sub_size, static_cast<int32_t>(members.size()));
      EXPECT_EQ(members.at(static_cast<size_t>(sub_rank)), rank);
      EXPECT_EQ(sum_of_members(child, rank, members), "");
      pg_group_t nested = nullptr;
      ASSERT_EQ(pg_group_split(child, 0, 0, &nested), PG_OK) << pg_last_error();
      EXPECT_EQ(sum_of_members(nested, rank, members), "");
      EXPECT_EQ(pg_group_destroy(nested), PG_OK) << pg_last_error();
      EXPECT_EQ(pg_group_destroy(child), PG_OK) << pg_last_error();
    }
    std::vector<int> everyone(static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) everyone[r] = r;
    EXPECT_EQ(sum_of_members(groups[rank], rank, everyone), "") << "the parent after the split";
  });
  for (pg_group_t g : groups) EXPECT_EQ(pg_group_destroy(g), PG_OK);
}

}  // namespace
}  // namespace procgroup::nccl_test
