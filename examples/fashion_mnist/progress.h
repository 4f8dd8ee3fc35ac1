// progress.h — rank 0's view of training: a one-line progress bar redrawn in place on a
// terminal, plain lines every few seconds otherwise (pipes, pgrun's prefixed output, CI
// logs), or nothing. Both show the epoch, running loss and accuracy, global samples/s, and
// the time left in the epoch and in the run.
//
//   Progress progress(ProgressMode::kAuto, /*epochs=*/10, /*first_epoch=*/0, steps_per_epoch);
//   progress.start_epoch(epoch);
//   progress.update(step + 1, samples_seen, mean_loss, accuracy);   // after every step
//   progress.end_epoch();
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace fashion_mnist {

enum class ProgressMode { kAuto, kBar, kLines, kNone };
ProgressMode parse_progress_mode(const std::string& name);  // std::invalid_argument

class Progress {
 public:
  using Clock = std::chrono::steady_clock;

  // kAuto: kBar when out is a terminal, else kLines. Lines at most every line_interval_s.
  Progress(ProgressMode mode, int epochs, int first_epoch, int64_t steps_per_epoch,
           double line_interval_s = 5.0, std::FILE* out = stdout);
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  ProgressMode mode() const { return mode_; }
  void start_epoch(int epoch);
  // steps_done in this epoch; samples: global samples seen in this epoch (all ranks).
  void update(int64_t steps_done, int64_t samples, double loss, double accuracy);
  void end_epoch();  // removes the bar, so the epoch's summary line can take its place

 private:
  std::string status(int64_t steps_done, int64_t samples, double loss, double accuracy) const;

  ProgressMode mode_;
  int epochs_, first_epoch_;
  int64_t steps_per_epoch_;
  double line_interval_s_;
  std::FILE* out_;
  int epoch_ = 0;
  Clock::time_point run_start_, epoch_start_, last_draw_;
  bool drawn_ = false;
};

// "1:05", "1:02:03".
std::string format_duration(double seconds);

}  // namespace fashion_mnist
