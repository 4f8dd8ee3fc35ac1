// collbench -g cuda. Without a device (label unit): the run fails at once, saying "no CUDA
// device" and CUDA's own reason (or that it was built without CUDA). With devices (label
// gpu, skipped elsewhere): every collective on device buffers through the nccl backend with
// every element checked, raw NCCL in the same run (--direct) with its ratio and added-time
// columns, and more ranks than GPUs refused with a message instead of a fake measurement.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench_run.h"
#include "cuda_probe.h"

namespace procgroup::testing {
namespace {

#ifndef COLLBENCH_GPU_TESTS
TEST(CollbenchDevice, CudaWithoutADeviceSaysSoAndFails) {
  const CudaProbe cuda = probe_cuda();
  if (cuda.devices > 0)
    GTEST_SKIP() << "a CUDA device is present: collbench_gpu_test covers -g cuda";
  const ProcessResult r = run({COLLBENCH_PATH, "allreduce", "-g", "cuda", "-b", "8", "-e", "8"}, 30,
                              {"RANK=", "WORLD_SIZE="});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const std::string want = cuda.built
                               ? "-g cuda: no CUDA device: " + cuda.reason
                               : std::string("-g cuda: this collbench was built without CUDA");
  EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("# collbench"), std::string::npos) << "no table without a device: " << r.out;
}
#else

const std::vector<std::string> kOps = {"allreduce", "allgather", "reduce_scatter",
                                       "broadcast", "reduce",    "alltoall",
                                       "gather",    "scatter",   "sendrecv"};

// One rank per GPU, at most 2 (a single GPU allows one rank only).
int ranks_for(const CudaProbe& cuda) { return cuda.devices >= 2 ? 2 : 1; }

class CollbenchGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    cuda_ = probe_cuda();
    if (cuda_.devices == 0) GTEST_SKIP() << "no CUDA device: " << cuda_.reason;
  }
  BenchRun run_on_gpu(int ranks, std::vector<std::string> args, bool csv = false) {
    args.insert(args.end(), {"-g", "cuda"});
    return run_collbench(ranks, args, csv, {"PROCGROUP_BACKEND=nccl"});
  }
  CudaProbe cuda_;
};

TEST_F(CollbenchGpu, EveryElementOfEveryOpIsRightThroughProcgroupAndRawNccl) {
  const int ranks = ranks_for(cuda_);
  for (const std::string& op : kOps) {
    if (op == "sendrecv" && ranks < 2) continue;  // needs two ranks, so two GPUs
    BenchRun r = run_on_gpu(ranks, {op, "-b", "12", "-e", "4M", "-f", "8", "-n", "2", "-w", "1",
                                    "-c", "1", "-r", std::to_string(ranks - 1), "--direct"});
    ASSERT_EQ(r.result.exit_code, 0) << op << "\n" << r.result.out << r.result.err;
    ASSERT_TRUE(r.json.is_object()) << r.result.out;
    EXPECT_EQ(r.json["backend"], "nccl") << op;
    EXPECT_EQ(r.json["direct"], "nccl") << op;
    EXPECT_EQ(r.json["buffers"].get<std::string>().rfind("cuda:", 0), 0u) << r.json["buffers"];
    EXPECT_EQ(r.json["wrong_total"], 0) << op << "\n" << r.result.out;
    ASSERT_EQ(r.json["rows"].size(), 7u) << op << "\n" << r.result.out;  // 12 B .. 3 MiB
    for (const auto& row : r.json["rows"]) {
      EXPECT_EQ(wrong_in_row(row), 0) << op << " " << row;
      EXPECT_GT(row["out_of_place"]["time_us"].get<double>(), 0) << row;
      EXPECT_GT(row["ratio_busbw"].get<double>(), 0) << row;
      EXPECT_TRUE(row.contains("added_us")) << row;
    }
    EXPECT_NE(r.result.out.find("nccl direct (out-of-place)"), std::string::npos) << r.result.out;
  }
}

TEST_F(CollbenchGpu, EveryDtypeAndReduceOpOnDeviceBuffers) {
  for (const std::string op : {"allreduce", "reduce_scatter", "reduce"}) {
    BenchRun r = run_on_gpu(ranks_for(cuda_), {op, "-b", "24", "-e", "48K", "-f", "16", "-n", "1",
                                               "-w", "0", "-d", "all", "-o", "all", "--direct"});
    ASSERT_EQ(r.result.exit_code, 0) << op << "\n" << r.result.out << r.result.err;
    EXPECT_EQ(r.json["rows"].size(), 8u * 5u * 3u) << r.result.out;
    EXPECT_EQ(r.json["wrong_total"], 0) << r.result.out;
  }
}

// The check must be able to fail on device buffers too.
TEST_F(CollbenchGpu, CorruptedInputIsCounted) {
  BenchRun r = run_on_gpu(
      1, {"allreduce", "-b", "64", "-e", "1K", "-f", "4", "-n", "1", "--corrupt-rank", "0"});
  EXPECT_NE(r.result.exit_code, 0) << r.result.out;
  ASSERT_TRUE(r.json.is_object()) << r.result.out << r.result.err;
  for (const auto& row : r.json["rows"]) EXPECT_EQ(row["out_of_place"]["wrong"], 1) << row;
}

TEST_F(CollbenchGpu, MoreRanksThanDevicesIsRefusedNotFaked) {
  BenchRun r = run_on_gpu(cuda_.devices + 1, {"allreduce", "-b", "8", "-e", "8"});
  EXPECT_NE(r.result.exit_code, 0) << r.result.out;
  const std::string said = r.result.out + r.result.err;  // pgrun may pass it on either
  EXPECT_NE(said.find("NCCL needs a device of its own for every rank"), std::string::npos) << said;
}
#endif

}  // namespace
}  // namespace procgroup::testing
