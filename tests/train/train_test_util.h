// Helpers for the fashion_mnist tests: a small synthetic dataset (learnable: each class
// brightens its own stripe of pixels), ranks as threads on the loopback backend, a trainer's
// state copied to the host, and comparisons of parameter lists.
//
//   FashionMnist data = synthetic_data(/*train=*/256, /*test=*/64, /*pixels=*/49, /*seed=*/3);
//   run_ranks(2, [&](procgroup::Group& g, int rank) { Trainer t(g, config, data); t.run(); });
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "idx.h"
#include "ops.h"
#include "procgroup/ddp/checkpoint.h"
#include "procgroup/procgroup.hpp"
#include "subprocess.h"
#include "trainer.h"

namespace fashion_mnist::testing {

inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline Dataset synthetic_split(int64_t n, int pixels, uint64_t seed) {
  Dataset d;
  d.size = n;
  d.pixels = pixels;
  d.images.resize(static_cast<size_t>(n) * pixels);
  d.labels.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    const int label = static_cast<int>(mix(seed * 1000003 + i) % kClasses);
    d.labels[i] = static_cast<uint8_t>(label);
    for (int k = 0; k < pixels; ++k) {
      const uint64_t r = mix((seed << 32) ^ (static_cast<uint64_t>(i) * pixels + k));
      const bool stripe = k * kClasses / pixels == label;
      d.images[static_cast<size_t>(i) * pixels + k] =
          static_cast<uint8_t>((r % 120) + (stripe ? 100 : 0));
    }
  }
  return d;
}

inline FashionMnist synthetic_data(int64_t train, int64_t test, int pixels, uint64_t seed) {
  return {synthetic_split(train, pixels, seed), synthetic_split(test, pixels, seed + 1)};
}

// An exception escaping body is a test failure naming the rank.
inline void run_ranks(int size, const std::function<void(procgroup::Group&, int)>& body) {
  procgroup::testing::TempDir dir;
  const std::string url = "file://" + dir.str();
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
        o.rank = rank;
        o.size = size;
        o.backend = "loopback";
        o.store_url = url.c_str();
        o.timeout_ms = 30000;
        procgroup::Group group(o);
        body(group, rank);
        group.destroy();
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << rank << ": " << e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
}

// A trainer's state() as host bytes (device tensors copied through its Ops).
inline std::vector<procgroup::ddp::CheckpointEntry> snapshot(Trainer& t) {
  std::vector<procgroup::ddp::CheckpointEntry> s;
  for (const auto& n : t.state()) {
    std::vector<unsigned char> bytes(n.tensor.bytes());
    if (n.tensor.device.type == PG_DEVICE_CPU) {
      std::memcpy(bytes.data(), n.tensor.data, bytes.size());
    } else {
      t.ops().to_host(bytes.data(), n.tensor.data, bytes.size());
    }
    s.push_back({n.name, n.tensor.dtype, n.tensor.numel, std::move(bytes)});
  }
  return s;
}

inline std::vector<float> as_floats(const procgroup::ddp::CheckpointEntry& e) {
  std::vector<float> v(e.numel);
  if (e.dtype == PG_DTYPE_F32) std::memcpy(v.data(), e.data.data(), e.data.size());
  return v;
}

// Largest |a - b| / (1 + |b|) over every f32 tensor the two states share by name.
inline double max_relative_difference(const std::vector<procgroup::ddp::CheckpointEntry>& a,
                                      const std::vector<procgroup::ddp::CheckpointEntry>& b) {
  double worst = 0;
  size_t compared = 0;
  for (const auto& x : a) {
    if (x.dtype != PG_DTYPE_F32) continue;
    for (const auto& y : b) {
      if (y.name != x.name) continue;
      EXPECT_EQ(x.numel, y.numel) << x.name;
      const auto u = as_floats(x), v = as_floats(y);
      for (size_t i = 0; i < std::min(u.size(), v.size()); ++i) {
        worst = std::max(worst, std::abs(double{u[i]} - v[i]) / (1.0 + std::abs(double{v[i]})));
      }
      ++compared;
    }
  }
  EXPECT_GT(compared, 0u) << "no tensors in common";
  return worst;
}

}  // namespace fashion_mnist::testing
