// PROCGROUP_TIMELINE=<prefix>: every operation of a rank (issue, start, end, bytes, status)
// and the caller's own marks (pg_timeline_mark: ddp's buckets) as a Chrome trace, the JSON
// that Perfetto and chrome://tracing load, in <prefix>.rank<R>.json. pid is the world rank
// and tid a group, so the files of all ranks merge by concatenating their traceEvents
// arrays. Events are buffered in memory, the last kCapacity of them, and written when the
// groups sharing the timeline (a world group and its subgroups) are destroyed.
//
//   auto timeline = std::make_shared<Timeline>("/tmp/run", /*rank=*/0);
//   int track = timeline->add_track("world");
//   uint64_t id = timeline->op_issued(track, label);  // then op_started(id), op_ended(id, ..)
//
// Off, the core's cost is one branch per operation on a null pointer (trace_op_* below).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"

namespace procgroup::detail {

struct OpLabel;

class Timeline {
 public:
  // Records kept: the last 131072 (operations and marks; 144 bytes each, 18 MiB). Older
  // ones are dropped, and the file says how many in otherData.dropped.
  static constexpr size_t kCapacity = size_t{1} << 17;

  // Marks, as pg_timeline_mark's phase: the Chrome trace's async b, e and n events.
  enum Phase : int32_t { kBegin = 0, kEnd = 1, kInstant = 2 };

  Timeline(std::string prefix, int rank);
  // A timeline whose file can be written: PG_ERR_CONFIG naming PROCGROUP_TIMELINE and the
  // path if not (at group creation, rather than a lost trace at the end).
  static Result<std::shared_ptr<Timeline>> create(std::string prefix, int rank);
  ~Timeline();  // flushes; a failure is logged
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // A track (the trace's tid) for a group; named after it.
  int add_track(std::string_view group_name);
  // An operation: its id for op_started/op_ended (never 0).
  uint64_t op_issued(int track, const OpLabel& label, Clock::time_point issued);
  void op_started(uint64_t id);
  void op_ended(uint64_t id, pg_status_t status);
  // A mark on a track; category and name are truncated to kNameBytes - 1 bytes.
  void mark(int track, std::string_view category, std::string_view name, uint64_t id, Phase phase,
            uint64_t bytes);

  const std::string& path() const { return path_; }
  // The trace as it stands.
  std::string to_json() const;
  // Writes the file if anything was recorded since the last write (or it was never written):
  // at each group's destroy, and when the last group goes.
  Status flush();

  static constexpr size_t kNameBytes = 32;

 private:
  struct Record {
    uint64_t id = 0;  // 0: an empty slot
    bool is_op = false;
    int32_t track = 0;
    int32_t phase_or_op = 0;  // a mark's Phase, or an operation's pg_op_t
    pg_status_t status = PG_PENDING;
    uint64_t seq = 0;  // an operation's collective seq, or a mark's id
    uint64_t bytes = 0;
    int64_t count = 0;  // an operation's elements per rank
    int32_t dtype = 0;
    Clock::time_point issued, started, ended;  // a mark: issued only
    char category[kNameBytes] = {};
    char name[kNameBytes] = {};
  };
  Record& append_locked();
  Record* find_locked(uint64_t id);

  const std::string path_;
  const int rank_;
  const int64_t wall_offset_us_;  // system_clock minus Clock, so ranks' times line up
  mutable std::mutex mutex_;
  std::vector<Record> ring_;
  std::vector<std::string> tracks_;
  uint64_t next_id_ = 1;
  uint64_t written_at_ = 0;  // next_id_ at the last write; 0: never written
};

// What the debug log and the timeline need of one operation. Empty, and costing one branch,
// when both are off.
struct OpTrace {
  uint64_t timeline_id = 0;    // 0: not on a timeline
  Clock::time_point issued{};  // set when the debug log or the timeline is on
  bool on() const { return issued != Clock::time_point{}; }
};

OpTrace trace_op_issued(Timeline* timeline, int track, const OpLabel& label);
// When the backend is handed the operation, or the core's algorithm begins.
void trace_op_started(Timeline* timeline, const OpTrace& trace);
// At completion: the timeline's end, and at debug level one log line with op, seq, bytes,
// status and the time since issue.
void trace_op_ended(Timeline* timeline, const OpTrace& trace, const OpLabel& label,
                    std::string_view group, const Status& status);

}  // namespace procgroup::detail
