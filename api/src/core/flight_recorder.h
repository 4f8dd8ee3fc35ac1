// The last operations of one group, kept for hang forensics: what was issued, when, and
// how it ended. Recording costs two short critical sections per operation.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "core/work.h"

namespace procgroup::detail {

class FlightRecorder {
 public:
  struct Entry {
    uint64_t id = 0;  // local issue order, counting send/recv too
    OpLabel label;
    Clock::time_point start;
    std::optional<Clock::time_point> end;  // coarse_now(): to a clock tick
    pg_status_t status = PG_PENDING;
  };
  // What a rank is doing, for the cross-rank summary.
  struct Progress {
    uint64_t last_completed_seq = 0;       // highest collective seq that completed
    std::optional<OpLabel> waiting_in;     // the oldest collective still running
  };

  explicit FlightRecorder(size_t capacity) : ring_(capacity) {}

  uint64_t start(const OpLabel& label, Clock::time_point now);  // now: when it was issued
  void finish(uint64_t id, pg_status_t status);
  std::vector<Entry> snapshot() const;  // oldest first
  Progress progress() const;
  // One line per entry: "#17 allreduce (f32 x 1024, sum) started -3.20 s, running".
  std::string format() const;

 private:
  mutable std::mutex mutex_;
  std::vector<Entry> ring_;
  uint64_t next_id_ = 1;
  uint64_t last_completed_seq_ = 0;
};

}  // namespace procgroup::detail
