// The runner with device memory (what collbench -g cuda uses), on the CPU: a fake Memory
// whose "device" buffers are separate host allocations and whose copies are counted, an
// engine that checks it is handed only device pointers, and an engine Timer. On one rank
// every collective's result equals its input, so the engine is a copy and the runner's own
// check says whether the data went down, through, and back up the right way.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <stdexcept>

#include "runner.h"

namespace procgroup::bench {
namespace {

class OneRank : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void barrier() override {}
  double allreduce(double value, RedOp) override { return value; }
  int64_t sum(int64_t value) override { return value; }
  void broadcast(void*, size_t, int) override {}
};

class FakeDevice : public Memory {
 public:
  std::string name() const override { return "fake:0"; }
  void* allocate(uint64_t bytes) override {
    void* p = std::calloc(bytes == 0 ? 1 : bytes, 1);
    if (p == nullptr) throw std::bad_alloc();
    blocks_.insert({static_cast<std::byte*>(p), bytes});
    return p;
  }
  void release(void* p) noexcept override { std::free(p); }
  void to_device(void* dst, const void* src, uint64_t bytes) override {
    EXPECT_TRUE(owns(dst, bytes)) << "to_device into host memory";
    EXPECT_FALSE(owns(src, bytes)) << "to_device from device memory";
    std::memcpy(dst, src, bytes);
    ++downs;
  }
  void to_host(void* dst, const void* src, uint64_t bytes) override {
    EXPECT_TRUE(owns(src, bytes)) << "to_host from host memory";
    std::memcpy(dst, src, bytes);
    ++ups;
  }
  bool owns(const void* p, uint64_t bytes) const {
    const auto* b = static_cast<const std::byte*>(p);
    for (const auto& [start, size] : blocks_) {
      if (b >= start && b + bytes <= start + size) return true;
    }
    return false;
  }
  int downs = 0, ups = 0;

 private:
  std::set<std::pair<std::byte*, uint64_t>> blocks_;
};

class FixedTimer : public Timer {
 public:
  void start() override { ++starts; }
  double stop_us() override { return 40.0; }
  int starts = 0;
};

// One rank: the output is the input (in place: already there).
class CopyEngine : public Engine {
 public:
  CopyEngine(const FakeDevice* device, Timer* timer) : device_(device), timer_(timer) {}
  void run(const OpCall& c, int iters, bool) override {
    const uint64_t bytes = c.layout.recv_count * dtype_size(c.dtype);
    if (device_ != nullptr) {
      EXPECT_TRUE(device_->owns(c.input, c.layout.send_count * dtype_size(c.dtype)));
      EXPECT_TRUE(device_->owns(c.output, bytes));
    }
    for (int i = 0; i < iters; ++i) {
      if (c.input != c.output) std::memmove(c.output, c.input, bytes);
    }
  }
  Timer* timer() override { return timer_; }

 private:
  const FakeDevice* device_;
  Timer* timer_;
};

RunInfo info_for(Coll op) {
  Options o;
  o.op = op;
  o.min_bytes = 4;
  o.max_bytes = 4096;
  o.factor = 8;
  o.iters = 4;
  o.warmup = 1;
  o.dtypes = {Dtype::kF32, Dtype::kBf16, Dtype::kI64};
  return RunInfo{"collbench", "fake", "", "", 1, o};
}

TEST(RunnerMemory, DeviceBuffersAreFilledAndCheckedThroughHostCopies) {
  for (Coll op : {Coll::kAllreduce, Coll::kAllgather, Coll::kReduceScatter, Coll::kBroadcast,
                  Coll::kReduce, Coll::kAlltoall, Coll::kGather, Coll::kScatter}) {
    OneRank comm;
    FakeDevice device;
    FixedTimer timer;
    CopyEngine engine(&device, &timer);
    EXPECT_EQ(run_benchmark(info_for(op), comm, engine, nullptr, &device), 0) << coll_name(op);
    EXPECT_GT(device.downs, 0) << coll_name(op);
    EXPECT_GT(device.ups, 0) << coll_name(op);
    EXPECT_GT(timer.starts, 0) << coll_name(op);
  }
}

// The check must see the device's result, not the host's inputs: an engine that writes
// nothing leaves the poisoned outputs, and every element is counted wrong.
class SilentEngine : public Engine {
 public:
  void run(const OpCall&, int, bool) override {}
};

TEST(RunnerMemory, AResultNeverWrittenOnTheDeviceIsWrong) {
  OneRank comm;
  FakeDevice device;
  SilentEngine engine;
  EXPECT_EQ(run_benchmark(info_for(Coll::kAllreduce), comm, engine, nullptr, &device), 1);
}

TEST(RunnerMemory, TheEnginesTimerGivesTheTime) {
  OneRank comm;
  FakeDevice device;
  FixedTimer timer;
  CopyEngine engine(&device, &timer);
  RunInfo info = info_for(Coll::kAllreduce);
  info.options.dtypes = {Dtype::kF32};
  info.options.json_path = ::testing::TempDir() + "runner_memory_test.json";
  ASSERT_EQ(run_benchmark(info, comm, engine, nullptr, &device), 0);
  // 40 us for -n 4: 10 us each, whatever the host clock says.
  std::FILE* f = std::fopen(info.options.json_path.c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::string text(1 << 16, '\0');
  text.resize(std::fread(text.data(), 1, text.size(), f));
  std::fclose(f);
  const nlohmann::json j = nlohmann::json::parse(text);
  ASSERT_EQ(j["rows"].size(), 4u);  // 4, 32, 256, 2048 B
  for (const auto& row : j["rows"]) {
    EXPECT_DOUBLE_EQ(row["out_of_place"]["time_us"].get<double>(), 10.0) << row;
    EXPECT_EQ(row["out_of_place"]["wrong"], 0) << row;
  }
  EXPECT_EQ(j["buffers"], "host");  // info.buffers is the tool's to set
}

}  // namespace
}  // namespace procgroup::bench
