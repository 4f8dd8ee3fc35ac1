#include "progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace fashion_mnist {
namespace {

constexpr int kBarWidth = 24;
constexpr double kRedrawSeconds = 0.1;  // a terminal needs no more than 10 redraws a second

double seconds_between(Progress::Clock::time_point a, Progress::Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

ProgressMode parse_progress_mode(const std::string& name) {
  if (name == "auto") return ProgressMode::kAuto;
  if (name == "bar") return ProgressMode::kBar;
  if (name == "lines") return ProgressMode::kLines;
  if (name == "none") return ProgressMode::kNone;
  throw std::invalid_argument("unknown progress mode '" + name + "' (auto, bar, lines, none)");
}

std::string format_duration(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  }
  return buf;
}

Progress::Progress(ProgressMode mode, int epochs, int first_epoch, int64_t steps_per_epoch,
                   double line_interval_s, std::FILE* out)
    : mode_(mode),
      epochs_(epochs),
      first_epoch_(first_epoch),
      steps_per_epoch_(steps_per_epoch),
      line_interval_s_(line_interval_s),
      out_(out),
      run_start_(Clock::now()) {
  if (mode_ == ProgressMode::kAuto) {
    mode_ = isatty(fileno(out_)) != 0 ? ProgressMode::kBar : ProgressMode::kLines;
  }
}

void Progress::start_epoch(int epoch) {
  epoch_ = epoch;
  epoch_start_ = last_draw_ = Clock::now();
  drawn_ = false;
}

std::string Progress::status(int64_t steps_done, int64_t samples, double loss,
                             double accuracy) const {
  const auto now = Clock::now();
  const double in_epoch = seconds_between(epoch_start_, now);
  const double in_run = seconds_between(run_start_, now);
  const double rate = in_epoch > 0 ? static_cast<double>(samples) / in_epoch : 0;
  // The epoch's remaining steps at this epoch's pace; later epochs at the run's average pace
  // (resumed epochs excluded: they ran in another invocation).
  const int64_t done_run = (epoch_ - first_epoch_) * steps_per_epoch_ + steps_done;
  const double per_step = done_run > 0 ? in_run / static_cast<double>(done_run) : 0;
  const double epoch_per_step = steps_done > 0 ? in_epoch / static_cast<double>(steps_done) : 0;
  const double epoch_left = epoch_per_step * static_cast<double>(steps_per_epoch_ - steps_done);
  const double run_left =
      epoch_left + per_step * static_cast<double>((epochs_ - epoch_ - 1) * steps_per_epoch_);
  char buf[256];
  std::snprintf(buf, sizeof buf, "loss %.4f acc %5.2f%% | %.0f samples/s | ETA %s epoch, %s run",
                loss, 100.0 * accuracy, rate, format_duration(epoch_left).c_str(),
                format_duration(run_left).c_str());
  return buf;
}

void Progress::update(int64_t steps_done, int64_t samples, double loss, double accuracy) {
  if (mode_ == ProgressMode::kNone) return;
  const auto now = Clock::now();
  const double since = seconds_between(last_draw_, now);
  const bool last = steps_done == steps_per_epoch_;
  const int pct = static_cast<int>(100 * steps_done / std::max<int64_t>(1, steps_per_epoch_));
  if (mode_ == ProgressMode::kBar) {
    if (since < kRedrawSeconds && drawn_ && !last) return;
    const int fill =
        static_cast<int>(kBarWidth * steps_done / std::max<int64_t>(1, steps_per_epoch_));
    std::string bar(kBarWidth, ' ');
    for (int i = 0; i < fill; ++i) bar[i] = '=';
    if (fill < kBarWidth) bar[fill] = '>';
    std::fprintf(out_, "\r\033[Kepoch %d/%d [%s] %3d%% %s", epoch_ + 1, epochs_, bar.c_str(), pct,
                 status(steps_done, samples, loss, accuracy).c_str());
  } else {
    if (since < line_interval_s_ || last) return;  // the epoch summary reports the end
    std::fprintf(out_, "epoch %d/%d %3d%% (step %lld/%lld) %s\n", epoch_ + 1, epochs_, pct,
                 static_cast<long long>(steps_done), static_cast<long long>(steps_per_epoch_),
                 status(steps_done, samples, loss, accuracy).c_str());
  }
  std::fflush(out_);
  last_draw_ = now;
  drawn_ = true;
}

void Progress::end_epoch() {
  if (mode_ == ProgressMode::kBar && drawn_) {
    std::fputs("\r\033[K", out_);
    std::fflush(out_);
  }
  drawn_ = false;
}

}  // namespace fashion_mnist
