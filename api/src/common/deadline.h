// A point in time after which a blocking call gives up, on the steady clock.
#pragma once

#include <chrono>
#include <cstdint>

#include "procgroup/backend_kit/work.hpp"

namespace procgroup::detail {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

using kit::coarse_now;   // the steady clock as of its last tick, cheaply
using kit::coarse_tick;

class Deadline {
 public:
  static Deadline after(Millis timeout) { return Deadline(Clock::now() + timeout); }
  static Deadline never() { return Deadline(Clock::time_point::max()); }
  explicit Deadline(Clock::time_point at) : at_(at) {}

  Clock::time_point at() const { return at_; }
  bool expired() const { return Clock::now() >= at_; }
  // Remaining time, clamped to [0, max]; never() gives max.
  Millis remaining(Millis max = Millis(INT64_MAX)) const {
    if (at_ == Clock::time_point::max()) return max;
    auto left = std::chrono::duration_cast<Millis>(at_ - Clock::now());
    if (left < Millis(0)) return Millis(0);
    return left < max ? left : max;
  }
  // remaining(max) for a caller that slices a wait: where the deadline is well beyond max
  // (the common case), a coarse clock read decides it (~10 ns on a VM, against ~50 ns for
  // steady_clock). The coarse clock is the same monotonic clock as of its last tick, so it
  // can only overstate what is left, by a tick and the tick's lateness: the margin of two
  // ticks and a millisecond covers that.
  Millis slice(Millis max) const {
    if (at_ == Clock::time_point::max()) return max;
    if (at_ - coarse_now() > max + 2 * coarse_tick() + Millis(1)) return max;
    return remaining(max);
  }
  // The earlier of two deadlines.
  Deadline min(const Deadline& other) const { return at_ < other.at_ ? *this : other; }

 private:
  Clock::time_point at_;
};

}  // namespace procgroup::detail
