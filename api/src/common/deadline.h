// A point in time after which a blocking call gives up, on the steady clock.
#pragma once

#include <chrono>
#include <cstdint>

namespace procgroup::detail {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

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
  // The earlier of two deadlines.
  Deadline min(const Deadline& other) const { return at_ < other.at_ ? *this : other; }

 private:
  Clock::time_point at_;
};

}  // namespace procgroup::detail
