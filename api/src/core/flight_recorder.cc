#include "core/flight_recorder.h"

#include <algorithm>

#include "common/dtype.h"

namespace procgroup::detail {

uint64_t FlightRecorder::start(const OpLabel& label, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  const uint64_t id = next_id_++;
  Entry& e = ring_[id % ring_.size()];
  e = Entry{id, label, now, std::nullopt, PG_PENDING};
  return id;
}

void FlightRecorder::finish(uint64_t id, pg_status_t status) {
  std::lock_guard lock(mutex_);
  Entry& e = ring_[id % ring_.size()];
  if (e.id == id && !e.end) {
    e.end = std::max(coarse_now(), e.start);  // to the tick: enough to tell slow from hung
    e.status = status;
    if (status == PG_OK) last_completed_seq_ = std::max(last_completed_seq_, e.label.seq);
  }
}

std::vector<FlightRecorder::Entry> FlightRecorder::snapshot() const {
  std::vector<Entry> entries;
  {
    std::lock_guard lock(mutex_);
    for (const Entry& e : ring_)
      if (e.id != 0) entries.push_back(e);
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.id < b.id; });
  return entries;
}

FlightRecorder::Progress FlightRecorder::progress() const {
  Progress p;
  std::lock_guard lock(mutex_);
  p.last_completed_seq = last_completed_seq_;
  for (const Entry& e : ring_)
    if (e.id != 0 && !e.end && e.label.seq != 0 &&
        (!p.waiting_in || e.label.seq < p.waiting_in->seq))
      p.waiting_in = e.label;
  return p;
}

std::string FlightRecorder::format() const {
  const auto now = Clock::now();
  auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  std::string text;
  for (const Entry& e : snapshot()) {
    std::string state = e.end ? fmt::format("{} after {:.3f} s", status_name(e.status),
                                            seconds(*e.end - e.start))
                              : fmt::format("running for {:.3f} s", seconds(now - e.start));
    text += fmt::format("  {} started {:.3f} s ago: {}\n", e.label.to_string(),
                        seconds(now - e.start), state);
  }
  return text;
}

}  // namespace procgroup::detail
