// The Reducer on every device (DeviceCase: cpu over loopback, cuda over the staging plugins
// and, at world size 1, the nccl plugin): N ranks train like one process on the whole batch
// with gradients on the device, produced asynchronously on a non-default stream; fp16/bf16
// compression within precision and equal to the CPU's results; half buckets divided before
// summing; unused parameters; rebuilt bucket views keeping their values.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "ddp_test_util.h"
#include "device_test_util.h"
#include "mlp.h"
#include "procgroup/ddp/half.h"
#include "procgroup/ddp/reducer.h"
#include "reducer_test_util.h"

namespace procgroup::ddp::testing {
namespace {

constexpr int kSteps = 4, kRows = 3;
constexpr float kLr = 0.2f, kMomentum = 0.9f;

struct Config {
  int world;
  size_t first, cap;
  bool view;
  int accumulate;
};

std::vector<std::vector<float>> reference_run(const Config& c) {
  Mlp model = Mlp::make({}, 7);
  Sgd sgd(model, kLr, kMomentum);
  GradStore grads(model);
  const int rows = c.world * c.accumulate * kRows;
  std::vector<std::vector<float>> after;
  for (int step = 0; step < kSteps; ++step) {
    grads.zero();
    backward(model, make_batch(model.shape, rows, 11, step), 1.0f / rows, grads.spans(),
             [](size_t) {});
    sgd.step(model, grads.spans());
    after.push_back(model.flat());
  }
  return after;
}

// Trains with values and gradients on `device`. The host model computes; each gradient is
// uploaded asynchronously on the Reducer's stream right before it is marked, so only
// ddp's stream ordering makes the averaged result right.
std::vector<std::vector<float>> device_run(Group& group, int rank, const Config& c,
                                           Device device) {
  static const char* const kNames[kMlpParams] = {"fc1.weight", "fc1.bias", "fc2.weight",
                                                 "fc2.bias"};
  Mlp model = Mlp::make({}, rank == 0 ? 7 : 100 + rank);
  TestStream stream(device);
  std::vector<DeviceArray<float>> values, grads;
  std::vector<Parameter> params;
  for (size_t k = 0; k < kMlpParams; ++k) {
    values.emplace_back(device, std::span<const float>(model.params[k]));
    grads.emplace_back(device, model.params[k].size());
    params.push_back(Parameter::of(kNames[k], values[k].span(),
                                   c.view ? std::span<float>() : grads[k].span(), device));
  }
  ReducerOptions o;
  o.first_bucket_bytes = c.first;
  o.bucket_cap_bytes = c.cap;
  o.gradient_as_bucket_view = c.view;
  o.cuda_stream = stream.get();
  Reducer reducer(group, params, o);
  for (size_t k = 0; k < kMlpParams; ++k) model.params[k] = values[k].download();  // rank 0's
  Sgd sgd(model, kLr, kMomentum);
  GradStore host(model);
  const int rows = c.world * c.accumulate * kRows;
  std::vector<std::vector<float>> after;
  auto fetch = [&] {
    for (size_t k = 0; k < kMlpParams; ++k) {
      const TensorRef g = reducer.grad(k);
      copy_to_host(device, host.data[k].data(), g.data, g.bytes());
    }
  };
  for (int step = 0; step < kSteps; ++step) {
    const Batch batch = make_batch(model.shape, rows, 11, step);
    for (int micro = 0; micro < c.accumulate; ++micro) {
      std::optional<NoSync> no_sync;
      if (micro + 1 < c.accumulate) no_sync.emplace(reducer.no_sync());
      fetch();  // the host mirror continues from what the device storage accumulated
      backward(model, batch.slice((rank * c.accumulate + micro) * kRows, kRows),
               1.0f / (c.accumulate * kRows), host.spans(), [&](size_t k) {
                 const TensorRef g = reducer.grad(k);
                 stream.upload_async(g.data, host.data[k].data(), g.bytes());
                 reducer.mark_grad_ready(k);
               });
      reducer.finalize();
    }
    fetch();
    sgd.step(model, host.spans());
    reducer.zero_grad();
    after.push_back(model.flat());
  }
  stream.synchronize();
  return after;
}

using DdpDeviceReducer = DeviceTest;

TEST_P(DdpDeviceReducer, RanksTrainLikeOneProcessOnTheWholeBatch) {
  for (int world = 1; world <= std::min(3, GetParam().max_world); world += 2) {
    for (auto [first, cap] : {std::pair<size_t, size_t>{1 << 20, 25 << 20}, {20, 250}}) {
      for (bool view : {false, true}) {
        for (int accumulate : {1, 2}) {
          const Config c{world, first, cap, view, accumulate};
          SCOPED_TRACE("world " + std::to_string(world) + " first " + std::to_string(first) +
                       " view " + std::to_string(view) + " accumulate " +
                       std::to_string(accumulate));
          const auto expected = reference_run(c);
          std::vector<std::vector<std::vector<float>>> got(world);
          run_ranks(world, [&](Group& g, int rank) { got[rank] = device_run(g, rank, c, device()); },
                    {.backend = backend()});
          for (int rank = 0; rank < world; ++rank) {
            ASSERT_EQ(got[rank].size(), size_t{kSteps}) << "rank " << rank << " failed";
            for (int step = 0; step < kSteps; ++step) {
              for (size_t i = 0; i < expected[step].size(); ++i) {
                const float want = expected[step][i];
                ASSERT_NEAR(got[rank][step][i], want, 2e-6 + 2e-6 * std::abs(want))
                    << "rank " << rank << " step " << step << " element " << i;
              }
              EXPECT_EQ(got[rank][step], got[0][step]) << "rank " << rank;
            }
          }
        }
      }
    }
  }
}

// One 257-element gradient per rank through `hook` on the device; each rank's result.
std::vector<std::vector<float>> reduce_with(const DeviceCase& dc, std::shared_ptr<CommHook> hook,
                                            int world, float (*value)(int, size_t)) {
  std::vector<std::vector<float>> got(world);
  run_ranks(world, [&](Group& group, int rank) {
    std::vector<float> host(257);
    for (size_t i = 0; i < host.size(); ++i) host[i] = value(rank, i);
    DeviceArray<float> w(dc.device, 257), g(dc.device, std::span<const float>(host));
    ReducerOptions o;
    o.comm_hook = hook;
    Reducer reducer(group, {Parameter::of("w", w.span(), g.span(), dc.device)}, o);
    reducer.mark_grad_ready(0);
    reducer.finalize();
    got[rank] = g.download();
  }, {.backend = dc.backend});
  return got;
}

float irregular(int rank, size_t i) {
  return std::sin(static_cast<float>(i) * 0.37f + rank) * (1.0f + static_cast<float>(i) / 16);
}

TEST_P(DdpDeviceReducer, CompressionHooksAreWithinPrecisionAndMatchTheCpu) {
  const int world = std::min(3, GetParam().max_world);
  const DeviceCase cpu = device_cases().front();
  for (auto [hook, precision] : {std::pair{fp16_compress_hook(), std::ldexp(1.0, -11)},
                                 std::pair{bf16_compress_hook(), std::ldexp(1.0, -8)}}) {
    const auto got = reduce_with(GetParam(), hook, world, irregular);
    const auto on_cpu = reduce_with(cpu, hook, world, irregular);
    for (int r = 0; r < world; ++r) ASSERT_EQ(got[r].size(), 257u) << "rank " << r;
    size_t inexact = 0;
    for (size_t i = 0; i < 257; ++i) {
      double mean = 0;
      for (int r = 0; r < world; ++r) mean += irregular(r, i) / static_cast<double>(world);
      EXPECT_NEAR(got[0][i], mean, 4 * precision * (1.0 + static_cast<double>(i) / 16)) << i;
      inexact += got[0][i] != static_cast<float>(mean);
      EXPECT_EQ(got[0][i], on_cpu[0][i]) << "same roundings as the CPU hook, element " << i;
    }
    if (world > 1) {
      EXPECT_GT(inexact, 100u) << hook->name() << " did not compress";
    }
  }
}

TEST_P(DdpDeviceReducer, HalfBucketsDivideBeforeSumming) {
  const int world = std::min(4, GetParam().max_world);
  std::vector<std::vector<Half>> got(world);
  run_ranks(world, [&](Group& group, int rank) {
    const std::vector<Half> big(8, to_half(40000.0f));
    DeviceArray<Half> v(device(), 8), g(device(), std::span<const Half>(big));
    Reducer reducer(group, {Parameter::of("h", v.span(), g.span(), device())});
    reducer.mark_grad_ready(0);
    reducer.finalize();
    got[rank] = g.download();
  }, {.backend = backend()});
  for (const auto& r : got) {
    ASSERT_EQ(r.size(), 8u);
    for (Half h : r) EXPECT_EQ(to_float(h), 40000.0f);  // summing first would give inf
  }
}

TEST_P(DdpDeviceReducer, UnusedParametersAndRebuiltBucketViews) {
  const int world = std::min(2, GetParam().max_world);
  std::vector<std::vector<std::vector<float>>> got(world);
  run_ranks(world, [&](Group& group, int rank) {
    FloatParams host({5, 7, 3});
    std::vector<DeviceArray<float>> values;
    std::vector<Parameter> params;
    for (size_t k = 0; k < 3; ++k) {
      values.emplace_back(device(), host.values[k].size());
      params.push_back(Parameter::of("p" + std::to_string(k), values[k].span(), {}, device()));
    }
    ReducerOptions o;
    o.first_bucket_bytes = o.bucket_cap_bytes = 0;  // one bucket per parameter
    o.gradient_as_bucket_view = true;
    o.find_unused_parameters = true;
    Reducer reducer(group, params, o);
    for (int pass = 0; pass < 2; ++pass) {
      // Marked in registration order (rank 0's order is adopted); rank 0 never uses p1.
      for (size_t k = 0; k < 3; ++k) {
        if (rank == 0 && k == 1) continue;
        std::vector<float> g(host.values[k].size());
        for (size_t i = 0; i < g.size(); ++i) g[i] = grad_value(rank, k, i) * (pass + 1);
        // The gradient storage is the bucket view: write it on a stream of our own.
        const TensorRef dst = reducer.grad(k);
        TestStream writer(device());
        writer.upload_async(dst.data, g.data(), dst.bytes());
        writer.synchronize();
        reducer.mark_grad_ready(k);
      }
      reducer.finalize();
      EXPECT_EQ(reducer.layout_generation(), 1) << "rebuilt once, to rank 0's order";
      std::vector<std::vector<float>> grads;
      for (size_t k = 0; k < 3; ++k) {
        const TensorRef g = reducer.grad(k);
        std::vector<float> h(g.numel);
        copy_to_host(device(), h.data(), g.data, g.bytes());
        grads.push_back(h);
      }
      if (pass == 1) got[rank] = grads;
      reducer.zero_grad();
      // zero_grad runs asynchronously on the reducer's stream (the legacy default stream
      // here), which the writer's non-blocking stream does not wait for: without this the
      // next pass's upload could land before the memset (the failure seen under load).
      synchronize(device());
    }
  }, {.backend = backend()});
  for (int r = 0; r < world; ++r) ASSERT_EQ(got[r].size(), 3u) << "rank " << r << " failed";
  for (size_t k = 0; k < 3; ++k) {
    for (size_t i = 0; i < got[0][k].size(); ++i) {
      float sum = 0;
      for (int r = 0; r < world; ++r) {
        if (!(r == 0 && k == 1)) sum += grad_value(r, k, i) * 2 / static_cast<float>(world);
      }
      EXPECT_FLOAT_EQ(got[0][k][i], sum) << k << " " << i;
      for (int r = 1; r < world; ++r) EXPECT_EQ(got[r][k][i], got[0][k][i]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, DdpDeviceReducer, ::testing::ValuesIn(device_cases()),
                         device_case_name);

}  // namespace
}  // namespace procgroup::ddp::testing
