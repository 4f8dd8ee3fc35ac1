// Coalesced broadcasts of parameters and buffers, and collective checkpoint save and load
// (root writes, every rank loads by broadcast; failures reach every rank, never a hang).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "ddp_test_util.h"
#include "device_test_util.h"
#include "procgroup/ddp/broadcast.h"
#include "procgroup/ddp/checkpoint.h"
#include "procgroup/ddp/error.h"
#include "procgroup/ddp/sync_batch_norm.h"

namespace procgroup::ddp::testing {
namespace {

// A model's worth of tensors of several dtypes; `who` decides the values.
struct Tensors {
  explicit Tensors(int who) {
    for (size_t i = 0; i < a.size(); ++i) a[i] = who * 100.0f + i;
    for (size_t i = 0; i < big.size(); ++i) big[i] = who - static_cast<float>(i);
    for (size_t i = 0; i < c.size(); ++i) c[i] = who * 0.5f;
    for (size_t i = 0; i < d.size(); ++i) d[i] = who * 1e-3 + i;
    for (size_t i = 0; i < e.size(); ++i) e[i] = who * 1000000007LL + static_cast<int64_t>(i);
    for (size_t i = 0; i < f.size(); ++i) f[i] = Half{static_cast<uint16_t>(who * 16 + i)};
  }
  std::vector<float> a = std::vector<float>(5), empty, big = std::vector<float>(1000),
                     c = std::vector<float>(7);
  std::vector<double> d = std::vector<double>(3);
  std::vector<int64_t> e = std::vector<int64_t>(2);
  std::vector<Half> f = std::vector<Half>(4);
  std::vector<TensorRef> refs() {
    return {TensorRef::of(std::span(a)),   TensorRef::of(std::span(empty)),
            TensorRef::of(std::span(big)), TensorRef::of(std::span(c)),
            TensorRef::of(std::span(d)),   TensorRef::of(std::span(e)),
            TensorRef::of(std::span(f))};
  }
  std::vector<NamedTensor> named() {
    const char* names[] = {"a", "empty", "big", "c", "d", "e", "f"};
    std::vector<NamedTensor> out;
    auto r = refs();
    for (size_t i = 0; i < r.size(); ++i) out.push_back({names[i], r[i]});
    return out;
  }
  bool operator==(const Tensors& o) const {
    auto bits = [](const std::vector<Half>& h) {
      std::vector<uint16_t> out;
      for (Half x : h) out.push_back(x.bits);
      return out;
    };
    return a == o.a && big == o.big && c == o.c && d == o.d && e == o.e && bits(f) == bits(o.f);
  }
};

TEST(DdpBroadcast, CoalescesByDtypeIntoFewBroadcasts) {
  run_ranks(3, [](Group& group, int rank) {
    Tensors t(rank + 1);
    // f32 (a, big, c) in one buffer, then f64, i64 and f16: 4 broadcasts for 7 tensors.
    EXPECT_EQ(broadcast_tensors(group, t.refs(), 1), 4u);
    EXPECT_TRUE(t == Tensors(2)) << "rank " << rank;
  });
}

TEST(DdpBroadcast, SplitsAtTheBucketSizeAndSendsLargeTensorsInPlace) {
  run_ranks(2, [](Group& group, int rank) {
    Tensors t(rank + 1);
    // 1 KiB buffers: [a] [big alone] [c] [d] [e] [f].
    EXPECT_EQ(broadcast_buffers(group, t.refs(), 0, 1024), 6u);
    EXPECT_TRUE(t == Tensors(1)) << "rank " << rank;
  });
}

TEST(DdpBroadcast, Parameters) {
  run_ranks(4, [](Group& group, int rank) {
    std::vector<float> w(10, static_cast<float>(rank)), g(10);
    std::vector<double> b(2, rank * 2.0), gb(2);
    const std::vector<Parameter> params = {Parameter::of("w", std::span(w), std::span(g)),
                                           Parameter::of("b", std::span(b), std::span(gb))};
    EXPECT_EQ(broadcast_parameters(group, params, 3), 2u);
    EXPECT_EQ(w, std::vector<float>(10, 3.0f));
    EXPECT_EQ(b, std::vector<double>(2, 6.0));
  });
}

// Without CUDA (build or device) CUDA tensors are refused with the reason, on every rank,
// before anything is sent: by broadcasts, SyncBatchNorm and checkpoint files.
TEST(DdpDeviceErrors, CudaTensorsWithoutCudaAreRefusedBeforeCommunicating) {
  const std::string why = cuda_unavailable();
  if (why.empty()) GTEST_SKIP() << "a CUDA device is present: the device tests cover it";
  auto expect_refused = [&](const std::function<void()>& fn) {
    try {
      fn();
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), PG_ERR_UNSUPPORTED) << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  run_ranks(2, [&](Group& group, int) {
    std::vector<float> x(4);
    TensorRef t = TensorRef::of(std::span(x), {PG_DEVICE_CUDA, 0});
    expect_refused([&] { broadcast_tensors(group, std::span(&t, 1)); });
    expect_refused([&] { SyncBatchNorm bn(group, 2, {.device = {PG_DEVICE_CUDA, 0}}); });
  });
  procgroup::testing::TempDir dir;
  std::vector<float> x(4);
  const std::vector<NamedTensor> state = {{"x", TensorRef::of(std::span(x), {PG_DEVICE_CUDA, 0})}};
  expect_refused([&] { write_checkpoint_file(dir.path() / "c.ckpt", state); });
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "c.ckpt"));
}

TEST(DdpCheckpointCollective, RankZeroSavesEveryRankLoads) {
  procgroup::testing::TempDir dir;
  const auto path = dir.path() / "state.ckpt";
  run_ranks(3, [&](Group& group, int rank) {
    Tensors saved(7);
    if (rank != 0) saved = Tensors(rank);  // only root's values must reach the file
    EXPECT_FALSE(load_checkpoint(group, path, saved.named()));  // nothing there yet
    save_checkpoint(group, path, saved.named());
    EXPECT_TRUE(std::filesystem::exists(path));  // in place when save returns, on every rank
    Tensors loaded(50 + rank);
    EXPECT_TRUE(load_checkpoint(group, path, loaded.named()));
    EXPECT_TRUE(loaded == Tensors(7)) << "rank " << rank;
  });
}

TEST(DdpCheckpointCollective, CorruptFileFailsEveryRankWithTheSameMessage) {
  procgroup::testing::TempDir dir;
  const auto path = dir.path() / "state.ckpt";
  Tensors t(1);
  write_checkpoint_file(path, t.named());
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(60);
    f.put('\x7f');
  }
  std::vector<std::string> errors(3);
  run_ranks(3, [&](Group& group, int rank) {
    Tensors mine(rank);
    try {
      load_checkpoint(group, path, mine.named());
    } catch (const Error& e) {
      errors[rank] = e.what();
    }
    EXPECT_TRUE(mine == Tensors(rank));  // untouched
  });
  for (const auto& e : errors) {
    EXPECT_NE(e.find("checkpoint load failed on rank 0: checkpoint "), std::string::npos) << e;
    EXPECT_NE(e.find("checksum mismatch"), std::string::npos) << e;
    EXPECT_EQ(e, errors[0]);
  }
}

TEST(DdpCheckpointCollective, FailedSaveOnRootFailsEveryRank) {
  std::vector<std::string> errors(2);
  run_ranks(2, [&](Group& group, int rank) {
    Tensors t(rank);
    try {
      save_checkpoint(group, "/nonexistent-dir/state.ckpt", t.named());
    } catch (const Error& e) {
      errors[rank] = e.what();
    }
  });
  for (const auto& e : errors) EXPECT_NE(e.find("save failed on rank 0"), std::string::npos) << e;
}

}  // namespace
}  // namespace procgroup::ddp::testing
