#include "trainer.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "procgroup/ddp/broadcast.h"
#include "procgroup/ddp/comm_hook.h"

namespace fashion_mnist {
namespace ddp = procgroup::ddp;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

BatchNormFactory batch_norm_factory(const procgroup::Group& group, bool sync, const Ops& ops) {
  const procgroup::Group* sync_group = sync ? &group : nullptr;
  return [&ops, sync_group](int c) { return ops.make_batch_norm(c, sync_group); };
}

// Writes text to path through a temporary file and a rename: readers never see half a file.
void write_atomically(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out.flush()) throw std::runtime_error("cannot write " + tmp.string());
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace

std::string csv_header() {
  return "epoch,step,train_loss,train_acc,test_loss,test_acc,lr,train_seconds,eval_seconds,"
         "samples_per_s,world_size,batch_per_rank";
}

std::string csv_row(const EpochRecord& r) {
  char buf[320];
  std::snprintf(buf, sizeof buf, "%d,%lld,%.6f,%.6f,%.6f,%.6f,%.6g,%.3f,%.3f,%.1f,%d,%d", r.epoch,
                static_cast<long long>(r.step), r.train_loss, r.train_acc, r.test_loss, r.test_acc,
                r.lr, r.train_seconds, r.eval_seconds, r.samples_per_s, r.world_size,
                r.batch_per_rank);
  return buf;
}

Trainer::Trainer(const procgroup::Group& group, const TrainConfig& config, const FashionMnist& data,
                 const Ops& ops)
    : group_(group),
      ops_(ops),
      config_(config),
      data_(data),
      rank_(group.rank()),
      world_(group.size()),
      model_(MlpShape{data.train.pixels, config.hidden, kClasses}, config.seed,
             batch_norm_factory(group, config.sync_bn, ops), ops),
      sgd_(model_, config.sgd),
      sampler_(static_cast<uint64_t>(data.train.size), world_, rank_,
               {.shuffle = true, .seed = config.seed, .drop_last = false}) {
  if (config_.batch_size <= 0) throw std::invalid_argument("--batch-size must be positive");
  // load_fashion_mnist refuses these; a caller's own data must not train on nothing (a NaN
  // loss) or test on images of another width.
  if (data.train.size <= 0 || data.test.size <= 0) {
    throw std::invalid_argument("the training and test sets must both hold samples");
  }
  if (data.test.pixels != data.train.pixels) {
    throw std::invalid_argument("test images have " + std::to_string(data.test.pixels) +
                                " pixels, training images " + std::to_string(data.train.pixels));
  }
  ddp::ReducerOptions o;
  o.gradient_as_bucket_view = config_.bucket_view;
  o.first_bucket_bytes = config_.first_bucket_kb * 1024;
  o.bucket_cap_bytes = config_.bucket_cap_kb * 1024;
  if (config_.comm_hook == "fp16") o.comm_hook = ddp::fp16_compress_hook();
  if (config_.comm_hook == "bf16") o.comm_hook = ddp::bf16_compress_hook();
  reducer_ = std::make_unique<ddp::Reducer>(group_, model_.parameters(), o);
  bind_grads();
  const size_t rows = std::max(config_.batch_size, config_.eval_batch);
  x_.resize(rows * data_.train.pixels);
  y_.resize(rows);
  x_dev_ = DeviceArray(ops_, x_.size());
  y_dev_ = DeviceBuffer<uint8_t>(ops_, rows);
  dlogits_ = DeviceArray(ops_, static_cast<size_t>(config_.batch_size) * kClasses);
}

Trainer::~Trainer() = default;

// With bucket views the gradients live in the Reducer's buckets, which move when it
// re-buckets after the first step: point the model at the current storage.
void Trainer::bind_grads() {
  if (!config_.bucket_view || layout_ == reducer_->layout_generation()) return;
  for (size_t i = 0; i < model_.num_parameters(); ++i) {
    model_.set_grad(i, reducer_->grad_as<float>(i));
  }
  layout_ = reducer_->layout_generation();
}

int64_t Trainer::steps_per_epoch() const {
  const auto n = static_cast<int64_t>(sampler_.num_samples());
  return (n + config_.batch_size - 1) / config_.batch_size;
}

std::vector<ddp::NamedTensor> Trainer::state() {
  std::vector<ddp::NamedTensor> s;
  for (size_t i = 0; i < model_.num_parameters(); ++i) {
    s.push_back({model_.name(i), ddp::TensorRef::of(model_.value(i), ops_.device())});
  }
  for (auto& b : model_.buffers()) s.push_back(b);
  for (auto& t : sgd_.state(model_)) s.push_back(t);
  s.push_back({"train.epochs_done", ddp::TensorRef::of(std::span(&epochs_done_, 1))});
  s.push_back({"train.steps_done", ddp::TensorRef::of(std::span(&steps_done_, 1))});
  s.push_back({"train.seed", ddp::TensorRef::of(std::span(&seed_saved_, 1))});
  s.push_back({"train.global_batch", ddp::TensorRef::of(std::span(&global_batch_saved_, 1))});
  return s;
}

// The given rows of a split, normalised, into x_dev_ and their labels into y_dev_.
void Trainer::load_batch(const Dataset& split, std::span<const int64_t> rows) {
  const int pixels = split.pixels;
  for (size_t r = 0; r < rows.size(); ++r) {
    split.normalized(rows[r], x_.data() + r * pixels);
    y_[r] = split.labels[rows[r]];
  }
  ops_.to_device(x_dev_.data(), x_.data(), rows.size() * pixels * sizeof(float));
  ops_.to_device(y_dev_.data(), y_.data(), rows.size());
}

LossStats Trainer::step(const std::vector<uint64_t>& indices, size_t first, int n, float lr) {
  const auto start = Clock::now();
  std::vector<int64_t> rows(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) rows[r] = static_cast<int64_t>(indices[first + r]);
  load_batch(data_.train, rows);
  model_.train(true);
  std::span<const float> logits = model_.forward(x_dev_.data(), n);
  // Each rank's loss is the mean over its rows; the Reducer's average over the ranks then
  // makes it the mean over the global batch.
  const LossStats stats = ops_.softmax_cross_entropy(logits.data(), y_dev_.data(), n, kClasses,
                                                     1.0f / static_cast<float>(n), dlogits_.data());
  double mark_ms = 0;
  model_.backward(dlogits_.first(static_cast<size_t>(n) * kClasses), [&](size_t i) {
    const auto t = Clock::now();
    reducer_->mark_grad_ready(i);
    mark_ms += ms_between(t, Clock::now());
  });
  ops_.synchronize();  // a GPU's backward has finished, not just been issued
  const auto backward_done = Clock::now();
  reducer_->finalize();
  const auto reduced = Clock::now();
  bind_grads();
  sgd_.step(model_, lr);
  reducer_->zero_grad();
  ops_.synchronize();
  times_ = {ms_between(start, backward_done), mark_ms, ms_between(backward_done, reduced),
            ms_between(reduced, Clock::now())};
  return stats;
}

// Without SyncBatchNorm each rank's running statistics follow its own batches; like
// PyTorch DDP's broadcast_buffers, make rank 0's the model's before evaluating or saving.
void Trainer::sync_buffers() {
  if (config_.sync_bn || world_ == 1) return;
  std::vector<ddp::TensorRef> refs;
  for (const auto& b : model_.buffers()) refs.push_back(b.tensor);
  ddp::broadcast_buffers(group_, refs);
}

Evaluation Trainer::evaluate() {
  sync_buffers();
  model_.train(false);
  const Dataset& test = data_.test;
  std::array<double, 3> sums{};  // loss, correct, count; this rank's share: i = rank mod world
  std::vector<int64_t> mine;
  for (int64_t i = rank_; i < test.size; i += world_) mine.push_back(i);
  for (size_t at = 0; at < mine.size(); at += config_.eval_batch) {
    const int n = static_cast<int>(std::min<size_t>(config_.eval_batch, mine.size() - at));
    load_batch(test, std::span(mine).subspan(at, n));
    std::span<const float> logits = model_.forward(x_dev_.data(), n);
    const LossStats s =
        ops_.softmax_cross_entropy(logits.data(), y_dev_.data(), n, kClasses, 1, nullptr);
    sums[0] += s.loss_sum;
    sums[1] += static_cast<double>(s.correct);
    sums[2] += n;
  }
  allreduce_values(group_, ops_, sums);
  model_.train(true);
  const double count = std::max(1.0, sums[2]);
  return {sums[0] / count, sums[1] / count, static_cast<int64_t>(sums[2])};
}

void Trainer::stall_if_asked(int64_t step) {
  if (step != config_.stall_at_step || rank_ != config_.stall_rank) return;  // nullopt: never
  write_atomically(config_.stall_marker, std::to_string(getpid()) + "\n");
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // until killed
}

// The checkpoint's CRC proves it intact, not sane: a file with a valid CRC and crafted
// values must not steer the run. Every rank holds the same broadcast values, so every rank
// throws the same error. Counters from another global batch are re-based to this run's steps
// per epoch, so the learning-rate schedule continues from the epoch reached.
void Trainer::check_resumed_state(int64_t global_batch) {
  const std::string file = "checkpoint " + config_.checkpoint.string() + ": ";
  const auto refuse = [&](const std::string& what) { throw std::invalid_argument(file + what); };
  if (epochs_done_ < 0 || epochs_done_ > kMaxEpochs) {
    refuse("train.epochs_done = " + std::to_string(epochs_done_) + " is not in 0.." +
           std::to_string(kMaxEpochs));
  }
  const int64_t max_global_batch = int64_t{kMaxBatch} * std::max(world_, 1);
  if (global_batch_saved_ < 1 || global_batch_saved_ > max_global_batch) {
    refuse("train.global_batch = " + std::to_string(global_batch_saved_) + " is not in 1.." +
           std::to_string(max_global_batch));
  }
  const int64_t expected_steps = epochs_done_ * steps_per_epoch();
  if (global_batch_saved_ == global_batch && steps_done_ != expected_steps) {
    refuse("train.steps_done = " + std::to_string(steps_done_) + ", but " +
           std::to_string(epochs_done_) + " epochs of " + std::to_string(steps_per_epoch()) +
           " steps at global batch " + std::to_string(global_batch) + " make " +
           std::to_string(expected_steps) +
           " (made with another --train-limit or data set, or not by fashion_mnist)");
  }
  steps_done_ = expected_steps;
  for (const ddp::NamedTensor& t : state()) {
    if (t.tensor.dtype != PG_DTYPE_F32) continue;
    std::vector<float> values(t.tensor.numel);
    ops_.to_host(values.data(), t.tensor.data, t.tensor.bytes());
    const bool variance = t.name.ends_with(".running_var");
    for (const float v : values) {
      if (!std::isfinite(v) || (variance && v < 0)) {
        refuse("tensor '" + t.name + "' holds " + std::to_string(v) +
               (variance ? " (a variance must be finite and non-negative)" : " (not finite)"));
      }
    }
  }
}

std::vector<std::string> Trainer::read_csv_rows(int keep_epochs) {
  std::vector<std::string> rows;
  std::ifstream in(config_.csv);
  std::string line;
  while (std::getline(in, line)) {
    const int epoch = std::atoi(line.c_str());  // 0 for the header
    if (epoch >= 1 && epoch <= keep_epochs) rows.push_back(line);
  }
  return rows;
}

void Trainer::write_csv(const std::vector<std::string>& rows) {
  std::ostringstream text;
  text << csv_header() << '\n';
  for (const auto& r : rows) text << r << '\n';
  write_atomically(config_.csv, text.str());
}

std::vector<EpochRecord> Trainer::run() {
  const bool lead = rank_ == 0;
  const int64_t global_batch = static_cast<int64_t>(config_.batch_size) * world_;
  seed_saved_ = static_cast<int64_t>(config_.seed);
  global_batch_saved_ = global_batch;
  if (!config_.checkpoint.empty() && config_.resume) {
    resumed_ = ddp::load_checkpoint(group_, config_.checkpoint, state());
    if (resumed_) check_resumed_state(global_batch);
    if (lead && resumed_) {
      std::printf("resumed from %s after epoch %lld (step %lld)\n", config_.checkpoint.c_str(),
                  static_cast<long long>(epochs_done_), static_cast<long long>(steps_done_));
      if (seed_saved_ != static_cast<int64_t>(config_.seed) ||
          global_batch_saved_ != global_batch) {
        std::printf(
            "warning: the checkpoint was made with seed %lld and global batch %lld; "
            "this run uses seed %llu and global batch %lld (the learning-rate schedule "
            "continues from the epoch reached)\n",
            static_cast<long long>(seed_saved_), static_cast<long long>(global_batch_saved_),
            static_cast<unsigned long long>(config_.seed), static_cast<long long>(global_batch));
      }
    } else if (lead) {
      std::printf("no checkpoint at %s yet: starting from scratch\n", config_.checkpoint.c_str());
    }
    seed_saved_ = static_cast<int64_t>(config_.seed);
    global_batch_saved_ = global_batch;
  }
  first_epoch_ = static_cast<int>(epochs_done_);
  std::vector<std::string> csv_rows;
  if (lead && !config_.csv.empty()) {
    if (resumed_) csv_rows = read_csv_rows(first_epoch_);
    write_csv(csv_rows);
  }

  const int64_t per_epoch = steps_per_epoch();
  const int64_t total_steps = per_epoch * config_.epochs;
  Progress progress(lead ? config_.progress : ProgressMode::kNone, config_.epochs, first_epoch_,
                    per_epoch, config_.progress_interval_s);
  std::vector<EpochRecord> records;
  for (int epoch = first_epoch_; epoch < config_.epochs; ++epoch) {
    sampler_.set_epoch(static_cast<uint64_t>(epoch));
    const std::vector<uint64_t> indices = sampler_.indices();
    progress.start_epoch(epoch);
    const auto start = Clock::now();
    std::array<double, 3> sums{};  // loss, correct, rows (this rank)
    float lr = config_.lr;
    for (int64_t s = 0; s < per_epoch; ++s) {
      stall_if_asked(steps_done_);
      const size_t first = static_cast<size_t>(s) * config_.batch_size;
      const int n = static_cast<int>(std::min<size_t>(config_.batch_size, indices.size() - first));
      lr = learning_rate(config_.lr, config_.schedule, steps_done_, total_steps);
      const LossStats st = step(indices, first, n, lr);
      ++steps_done_;
      sums[0] += st.loss_sum;
      sums[1] += static_cast<double>(st.correct);
      sums[2] += n;
      progress.update(s + 1, static_cast<int64_t>(sums[2]) * world_, sums[0] / sums[2],
                      sums[1] / sums[2]);
    }
    allreduce_values(group_, ops_, sums);
    const double train_seconds = seconds_since(start);
    progress.end_epoch();
    const auto eval_start = Clock::now();
    const Evaluation ev = evaluate();
    EpochRecord r;
    r.epoch = epoch + 1;
    r.step = steps_done_;
    r.train_loss = sums[0] / sums[2];
    r.train_acc = sums[1] / sums[2];
    r.test_loss = ev.loss;
    r.test_acc = ev.accuracy;
    r.lr = lr;
    r.train_seconds = train_seconds;
    r.eval_seconds = seconds_since(eval_start);
    r.samples_per_s = sums[2] / train_seconds;
    r.world_size = world_;
    r.batch_per_rank = config_.batch_size;
    epochs_done_ = epoch + 1;
    // The CSV row goes first: a run killed between the two redoes this epoch on resume and
    // replaces the row, rather than lacking it.
    if (lead) {
      std::printf(
          "epoch %2d/%d  train loss %.4f acc %6.2f%%  test loss %.4f acc %6.2f%%  "
          "lr %.4f  %.1fs  %.0f samples/s\n",
          r.epoch, config_.epochs, r.train_loss, 100 * r.train_acc, r.test_loss, 100 * r.test_acc,
          r.lr, r.train_seconds + r.eval_seconds, r.samples_per_s);
      std::fflush(stdout);
      if (!config_.csv.empty()) {
        csv_rows.push_back(csv_row(r));
        write_csv(csv_rows);
      }
    }
    if (!config_.checkpoint.empty()) ddp::save_checkpoint(group_, config_.checkpoint, state());
    records.push_back(r);
  }
  if (!config_.final_state.empty()) {
    sync_buffers();
    if (lead) ddp::write_checkpoint_file(config_.final_state, state());
  }
  return records;
}

}  // namespace fashion_mnist
