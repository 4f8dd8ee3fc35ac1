// SyncBatchNorm, broadcasts and checkpoints on every device (DeviceCase): batch norm on
// uneven per-rank batches (one empty) against the double-precision reference, with inputs,
// outputs, gradients, parameters and running statistics in device memory and kernels on a
// non-default stream; eval from running statistics; coalesced broadcasts of parameters and
// buffers; checkpoints of device tensors (with a host tensor beside them) saved and loaded.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "batch_norm_reference.h"
#include "ddp_test_util.h"
#include "device_test_util.h"
#include "procgroup/ddp/broadcast.h"
#include "procgroup/ddp/checkpoint.h"
#include "procgroup/ddp/sync_batch_norm.h"

namespace procgroup::ddp::testing {
namespace {

using DdpDeviceCollectives = DeviceTest;

TEST_P(DdpDeviceCollectives, SyncBatchNormMatchesTheConcatenatedBatch) {
  std::vector<int> rows = {3, 0, 5, 1};
  rows.resize(std::min<size_t>(rows.size(), GetParam().max_world));
  if (rows.size() == 1) rows[0] = 4;
  const int world = static_cast<int>(rows.size());
  const int total = std::accumulate(rows.begin(), rows.end(), 0);
  const size_t per_row = kC * kS;
  std::vector<float> x(total * per_row), dy(total * per_row);
  for (size_t k = 0; k < x.size(); ++k) {
    x[k] = input(0, k);
    dy[k] = grad_out(k);
  }
  const Reference ref(x, dy, total, {0, 0, 0}, {1, 1, 1});
  std::vector<float> y(x.size()), dx(x.size());
  std::vector<std::vector<float>> dw(world), db(world), running(world);
  run_ranks(world, [&](Group& group, int rank) {
    TestStream stream(device());
    SyncBatchNorm bn(group, kC,
                     {kEps, kMomentum, true, true, device(), stream.get()});
    std::vector<float> wb(2 * kC);
    for (int c = 0; c < kC; ++c) {
      wb[c] = weight(c);
      wb[kC + c] = bias(c);
    }
    // On the module's stream, so forward's kernels see them.
    stream.upload_async(bn.weight().data(), wb.data(), kC * sizeof(float));
    stream.upload_async(bn.bias().data(), wb.data() + kC, kC * sizeof(float));
    size_t first = 0;
    for (int r = 0; r < rank; ++r) first += rows[r] * per_row;
    const size_t len = rows[rank] * per_row;
    DeviceArray<float> xs(device(), std::span<const float>(x.data() + first, len)),
        dys(device(), std::span<const float>(dy.data() + first, len)), ys(device(), len),
        dxs(device(), len), gw(device(), kC), gb(device(), kC);
    bn.forward(xs.span(), rows[rank], kS, ys.span());
    bn.backward(xs.span(), dys.span(), dxs.span(), gw.span(), gb.span());
    stream.synchronize();
    std::vector<float> mine = ys.download(), mine_dx = dxs.download();
    std::copy(mine.begin(), mine.end(), y.begin() + first);
    std::copy(mine_dx.begin(), mine_dx.end(), dx.begin() + first);
    dw[rank] = gw.download();
    db[rank] = gb.download();
    running[rank].resize(2 * kC);
    copy_to_host(device(), running[rank].data(), bn.running_mean().data(), kC * sizeof(float));
    copy_to_host(device(), running[rank].data() + kC, bn.running_var().data(),
                 kC * sizeof(float));
  }, {.backend = backend()});
  for (int r = 0; r < world; ++r) ASSERT_EQ(running[r].size(), 2u * kC) << "rank " << r;
  for (size_t k = 0; k < x.size(); ++k) {
    ASSERT_NEAR(y[k], ref.y[k], 2e-6 * (1 + std::abs(ref.y[k]))) << "y " << k;
    ASSERT_NEAR(dx[k], ref.dx[k], 2e-6 * (1 + std::abs(ref.dx[k]))) << "dx " << k;
  }
  for (int c = 0; c < kC; ++c) {
    double sum_dw = 0, sum_db = 0;
    for (int r = 0; r < world; ++r) {
      sum_dw += dw[r][c];
      sum_db += db[r][c];
      EXPECT_NEAR(running[r][c], ref.running_mean[c], 1e-6) << "rank " << r;
      EXPECT_NEAR(running[r][kC + c], ref.running_var[c], 1e-6 * ref.running_var[c]);
    }
    EXPECT_NEAR(sum_dw, ref.dweight[c], 1e-5 * (1 + std::abs(ref.dweight[c]))) << c;
    EXPECT_NEAR(sum_db, ref.dbias[c], 1e-5 * (1 + std::abs(ref.dbias[c]))) << c;
  }
}

TEST_P(DdpDeviceCollectives, SyncBatchNormEvalUsesRunningStatistics) {
  run_ranks(1, [&](Group& group, int) {
    SyncBatchNorm bn(group, 2, {.device = device()});
    const std::vector<float> stats = {0.0f, 2.0f, 1.0f, 4.0f};  // means, then variances
    TestStream s(device());
    s.upload_async(bn.running_mean().data(), stats.data(), 2 * sizeof(float));
    s.upload_async(bn.running_var().data(), stats.data() + 2, 2 * sizeof(float));
    s.synchronize();
    bn.eval();
    const std::vector<float> xv = {5.0f, 6.0f};
    DeviceArray<float> x(device(), std::span<const float>(xv)), y(device(), 2);
    bn.forward(x.span(), 1, 1, y.span());
    const std::vector<float> out = y.download();
    EXPECT_NEAR(out[0], 5.0 / std::sqrt(1 + 1e-5), 1e-5);
    EXPECT_NEAR(out[1], (6.0 - 2.0) / std::sqrt(4 + 1e-5), 1e-5);
    EXPECT_EQ(bn.num_batches_tracked(), 0);
  }, {.backend = backend()});
}

TEST_P(DdpDeviceCollectives, BroadcastsAndCheckpointsOfDeviceTensors) {
  const int world = std::min(3, GetParam().max_world);
  procgroup::testing::TempDir dir;
  const auto path = dir.path() / "state.ckpt";
  run_ranks(world, [&](Group& group, int rank) {
    TestStream stream(device());
    const std::vector<float> a(5, rank + 1.0f), big(1000, rank * 2.0f);
    const std::vector<double> d(3, rank * 0.5);
    DeviceArray<float> da(device(), std::span<const float>(a)),
        dbig(device(), std::span<const float>(big));
    DeviceArray<double> dd(device(), std::span<const double>(d));
    int64_t step = 10 + rank;  // a host tensor beside device ones
    const std::vector<TensorRef> refs = {da.tensor(), dd.tensor(), dbig.tensor()};
    // 1 KiB buffers: [a] [big alone, in place] [d].
    EXPECT_EQ(broadcast_buffers(group, refs, world - 1, 1024, stream.get()), 3u);
    stream.synchronize();
    EXPECT_EQ(da.download(), std::vector<float>(5, static_cast<float>(world)));
    EXPECT_EQ(dbig.download(), std::vector<float>(1000, (world - 1) * 2.0f));
    EXPECT_EQ(dd.download(), std::vector<double>(3, (world - 1) * 0.5));

    std::vector<NamedTensor> state = {{"a", da.tensor()},
                                      {"big", dbig.tensor()},
                                      {"step", TensorRef::of(std::span(&step, 1))}};
    save_checkpoint(group, path, state);  // root writes rank 0's values
    da.upload(std::vector<float>(5, -1.0f));
    step = -1;
    EXPECT_TRUE(load_checkpoint(group, path, state));
    EXPECT_EQ(da.download(), std::vector<float>(5, static_cast<float>(world)));
    EXPECT_EQ(step, 10);
  }, {.backend = backend()});
  const std::vector<CheckpointEntry> file = read_checkpoint_file(path);
  ASSERT_EQ(file.size(), 3u);
  EXPECT_EQ(file[1].name, "big");
  float first = 0;
  std::memcpy(&first, file[1].data.data(), sizeof first);
  EXPECT_EQ(first, (world - 1) * 2.0f) << "device values reached the file";
}

INSTANTIATE_TEST_SUITE_P(Devices, DdpDeviceCollectives, ::testing::ValuesIn(device_cases()),
                         device_case_name);

}  // namespace
}  // namespace procgroup::ddp::testing
