// sampler.h — which dataset indices each rank trains on in an epoch.
//
// Every rank gets num_samples() indices, rank-strided from one permutation of the dataset
// that depends only on (seed, epoch): together the ranks cover the dataset (padded by
// repeating from the start of the permutation to an even split, or with the tail dropped
// when drop_last), with equal counts and a fresh order every epoch.
//
//   ddp::DistributedSampler sampler(dataset.size(), group.size(), group.rank(), {.seed = 42});
//   for (uint64_t epoch = 0; epoch < epochs; ++epoch) {
//     for (uint64_t i : sampler.indices(epoch)) train_on(dataset[i]);
//   }
//
// The permutation is our own (SplitMix64 + Fisher-Yates, below), so it is the same on every
// platform and compiler; std::shuffle and std::uniform_int_distribution are not.
#pragma once

#include <cstdint>
#include <vector>

namespace procgroup::ddp {

struct SamplerOptions {
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;  // true: drop the tail so no sample repeats; false: pad by repeating
};

class DistributedSampler {
 public:
  DistributedSampler(uint64_t dataset_size, int world_size, int rank, SamplerOptions options = {});

  // The epoch indices() uses; indices(epoch) takes it explicitly, so it cannot be forgotten.
  void set_epoch(uint64_t epoch) { epoch_ = epoch; }
  uint64_t epoch() const { return epoch_; }

  uint64_t num_samples() const { return num_samples_; }  // per rank
  uint64_t total_size() const { return num_samples_ * world_size_; }

  std::vector<uint64_t> indices() const { return indices(epoch_); }
  std::vector<uint64_t> indices(uint64_t epoch) const;

 private:
  uint64_t dataset_size_;
  uint64_t world_size_;
  uint64_t rank_;
  SamplerOptions options_;
  uint64_t num_samples_;
  uint64_t epoch_ = 0;
};

// The permutation of 0..n-1 for (seed, epoch): Fisher-Yates from the back, j drawn in
// [0, i] by Lemire's multiply-shift with rejection, from a SplitMix64 stream whose state
// starts at mix(seed) ^ mix(epoch ^ 0x6a09e667f3bcc909) (mix = SplitMix64's finaliser).
// Mixing rather than adding keeps (seed 1, epoch 0) and (seed 0, epoch 1) apart.
std::vector<uint64_t> shuffled_indices(uint64_t n, uint64_t seed, uint64_t epoch);

}  // namespace procgroup::ddp
