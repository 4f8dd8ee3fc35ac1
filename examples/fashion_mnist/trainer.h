// trainer.h — data-parallel training of the Fashion-MNIST MLP on a procgroup group.
//
// Every rank holds the whole model and trains on its DistributedSampler share of each
// epoch; per step the ddp::Reducer averages the gradients (bucketed, overlapping backward),
// so all copies stay equal. The global batch is world_size x batch_size and, gradients being
// averaged, `lr` is the learning rate for that global batch. After each epoch the test set is
// evaluated (sharded over the ranks, sums reduced), rank 0 writes the checkpoint and the CSV.
// The model, its gradients and the optimizer live on the Ops' device (ops.h); the data stays
// on the host and is copied per batch. Everything sent over the group is on that device too
// (the group may reduce nothing else: NCCL): gradients, broadcasts and checkpoints of the
// device tensors themselves, the loss and accuracy sums through allreduce_values.
//
//   procgroup::Group group = procgroup::Group::from_env();
//   FashionMnist data = load_fashion_mnist(config.data_dir);
//   Trainer trainer(group, config, data);
//   for (const EpochRecord& e : trainer.run()) std::printf("%.2f%%\n", 100 * e.test_acc);
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "idx.h"
#include "mlp.h"
#include "procgroup/ddp/reducer.h"
#include "procgroup/ddp/sampler.h"
#include "progress.h"
#include "sgd.h"

namespace fashion_mnist {

// Bounds of the run's counts: the command line's and a resumed checkpoint's.
inline constexpr int kMaxEpochs = 1'000'000;
inline constexpr int kMaxBatch = 1 << 24;  // per rank

struct TrainConfig {
  std::filesystem::path data_dir = kDefaultDataDir;
  int64_t train_limit = 0, test_limit = 0;  // > 0: the first N samples only
  std::vector<int> hidden = {512, 256};
  int epochs = 10;
  int batch_size = 64;  // per rank
  float lr = 0.1f;      // for the global batch
  Schedule schedule = Schedule::kCosine;
  SgdOptions sgd;
  uint64_t seed = 1;
  std::string device = "cpu";  // cpu or cuda: which Ops main() makes (see ops.h)
  bool sync_bn = false;
  std::filesystem::path checkpoint;  // empty: none
  bool resume = false;
  std::filesystem::path csv;  // empty: none
  ProgressMode progress = ProgressMode::kAuto;
  double progress_interval_s = 5.0;
  int eval_batch = 1000;
  bool bucket_view = true;
  size_t first_bucket_kb = 1024, bucket_cap_kb = 25 * 1024;
  std::string comm_hook = "allreduce";  // or fp16 / bf16: gradients compressed on the wire
  std::filesystem::path final_state;    // empty: none; else rank 0 writes the parameters at the end
  // Failure injection for tests: rank stall_rank writes its pid to stall_marker and stops
  // (sleeps) before global step stall_at_step, so a test can kill it mid-epoch. Unset, no
  // value of a (checkpointed) step can reach it.
  std::optional<int64_t> stall_at_step;
  int stall_rank = 0;
  std::filesystem::path stall_marker;
};

struct EpochRecord {
  int epoch = 0;     // 1-based
  int64_t step = 0;  // optimizer steps done at the end of the epoch
  double train_loss = 0, train_acc = 0, test_loss = 0, test_acc = 0;
  double lr = 0;  // at the epoch's last step
  double train_seconds = 0, eval_seconds = 0;
  double samples_per_s = 0;  // global training throughput
  int world_size = 1, batch_per_rank = 0;
};
std::string csv_header();
std::string csv_row(const EpochRecord& r);

// Where the last step's time went: data copy, forward and backward, of which mark_ms inside
// Reducer::mark_grad_ready (dividing by the world size, launching buckets); waiting in
// Reducer::finalize (communication not hidden behind backward); the optimizer and zero_grad.
struct StepTimes {
  double compute_ms = 0, mark_ms = 0, finalize_ms = 0, update_ms = 0;
};

struct Evaluation {
  double loss = 0, accuracy = 0;
  int64_t count = 0;
};

class Trainer {
 public:
  // ops (which must outlive the trainer) says where the model lives; group must reduce
  // buffers on that device (for CUDA: a group made with device_type PG_DEVICE_CUDA).
  Trainer(const procgroup::Group& group, const TrainConfig& config, const FashionMnist& data,
          const Ops& ops = cpu_ops());
  ~Trainer();

  // Trains (resuming when asked and a checkpoint exists) to config.epochs; returns the
  // epochs this call ran. Collective.
  std::vector<EpochRecord> run();
  // Epochs completed before run() started this time (the checkpoint's, when resumed).
  int first_epoch() const { return first_epoch_; }
  bool resumed() const { return resumed_; }

  // One optimizer step on rows first..first+n-1 of the epoch's index list. Collective.
  LossStats step(const std::vector<uint64_t>& indices, size_t first, int n, float lr);
  const StepTimes& last_step_times() const { return times_; }
  Evaluation evaluate();  // collective
  int64_t steps_per_epoch() const;
  int batch_size() const { return config_.batch_size; }
  std::vector<uint64_t> epoch_indices(int epoch) const { return sampler_.indices(epoch); }

  Mlp& model() { return model_; }
  const Ops& ops() const { return ops_; }
  procgroup::ddp::Reducer& reducer() { return *reducer_; }
  // Everything a checkpoint holds: parameters, BatchNorm buffers and optimizer state (views
  // of the Ops' device memory, as ddp's checkpoints and broadcasts take them) and the
  // counters (host). Read device tensors with ops().to_host.
  std::vector<procgroup::ddp::NamedTensor> state();

 private:
  void bind_grads();
  void load_batch(const Dataset& split, std::span<const int64_t> rows);
  void sync_buffers();
  void check_resumed_state(int64_t global_batch);
  void stall_if_asked(int64_t step);
  void write_csv(const std::vector<std::string>& rows);
  std::vector<std::string> read_csv_rows(int keep_epochs);

  const procgroup::Group& group_;
  const Ops& ops_;
  TrainConfig config_;
  const FashionMnist& data_;
  int rank_, world_;
  Mlp model_;
  std::unique_ptr<procgroup::ddp::Reducer> reducer_;
  int layout_ = -1;
  Sgd sgd_;
  procgroup::ddp::DistributedSampler sampler_;
  int64_t epochs_done_ = 0, steps_done_ = 0;  // checkpointed counters
  int64_t seed_saved_ = 0, global_batch_saved_ = 0;
  int first_epoch_ = 0;
  bool resumed_ = false;
  StepTimes times_;
  std::vector<float> x_;  // a batch on the host, then on the device
  std::vector<uint8_t> y_;
  DeviceArray x_dev_, dlogits_;
  DeviceBuffer<uint8_t> y_dev_;
};

}  // namespace fashion_mnist
