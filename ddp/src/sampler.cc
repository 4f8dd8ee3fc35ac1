#include "procgroup/ddp/sampler.h"

#include <numeric>
#include <string>
#include <utility>

#include "procgroup/ddp/error.h"

namespace procgroup::ddp {
namespace {

__extension__ typedef unsigned __int128 uint128;  // GCC/Clang; __extension__ keeps -Wpedantic quiet

uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}
  uint64_t next() { return mix(state_ += 0x9e3779b97f4a7c15ull); }
  // Uniform in [0, bound), bound > 0, without modulo bias.
  uint64_t below(uint64_t bound) {
    uint128 m = static_cast<uint128>(next()) * bound;
    auto low = static_cast<uint64_t>(m);
    if (low < bound) {
      const uint64_t threshold = -bound % bound;
      while (low < threshold) {
        m = static_cast<uint128>(next()) * bound;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

 private:
  uint64_t state_;
};

}  // namespace

std::vector<uint64_t> shuffled_indices(uint64_t n, uint64_t seed, uint64_t epoch) {
  std::vector<uint64_t> order(n);
  std::iota(order.begin(), order.end(), uint64_t{0});
  SplitMix64 rng(mix(seed) ^ mix(epoch ^ 0x6a09e667f3bcc909ull));
  for (uint64_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  return order;
}

DistributedSampler::DistributedSampler(uint64_t dataset_size, int world_size, int rank,
                                       SamplerOptions options)
    : dataset_size_(dataset_size),
      world_size_(static_cast<uint64_t>(world_size)),
      rank_(static_cast<uint64_t>(rank)),
      options_(options) {
  if (world_size <= 0 || rank < 0 || rank >= world_size) {
    throw Error(PG_ERR_INVALID_ARGUMENT, "DistributedSampler: rank " + std::to_string(rank) +
                                             " is not in a world of " + std::to_string(world_size));
  }
  num_samples_ = options_.drop_last ? dataset_size_ / world_size_
                                    : (dataset_size_ + world_size_ - 1) / world_size_;
}

std::vector<uint64_t> DistributedSampler::indices(uint64_t epoch) const {
  std::vector<uint64_t> all;
  if (options_.shuffle) {
    all = shuffled_indices(dataset_size_, options_.seed, epoch);
  } else {
    all.resize(dataset_size_);
    std::iota(all.begin(), all.end(), uint64_t{0});
  }
  const uint64_t total = total_size();
  // Pad by repeating from the start (possibly more than once when the dataset is smaller
  // than the world), or drop the tail.
  for (uint64_t i = 0; all.size() < total; ++i) all.push_back(all[i]);
  std::vector<uint64_t> mine;
  mine.reserve(num_samples_);
  for (uint64_t i = rank_; i < total; i += world_size_) mine.push_back(all[i]);
  return mine;
}

}  // namespace procgroup::ddp
