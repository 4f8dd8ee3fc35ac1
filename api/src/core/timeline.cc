#include "core/timeline.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>

#include "common/dtype.h"
#include "common/log.h"
#include "core/work.h"

namespace procgroup::detail {
namespace {

int64_t wall_minus_steady_us() {
  namespace chrono = std::chrono;
  const auto wall = chrono::duration_cast<chrono::microseconds>(
      chrono::system_clock::now().time_since_epoch());
  const auto steady =
      chrono::duration_cast<chrono::microseconds>(Clock::now().time_since_epoch());
  return (wall - steady).count();
}

// A JSON string's contents: names come from users and group ids.
std::string json_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u >= 0x7f) {  // control bytes, and bytes that may not be UTF-8
      out += fmt::format("\\u{:04x}", u);
    } else {
      out += c;
    }
  }
  return out;
}

void copy_name(char (&to)[Timeline::kNameBytes], std::string_view from) {
  const size_t n = std::min(from.size(), Timeline::kNameBytes - 1);
  std::memcpy(to, from.data(), n);
  to[n] = '\0';
}

}  // namespace

Timeline::Timeline(std::string prefix, int rank)
    : path_(fmt::format("{}.rank{}.json", prefix, rank)),
      rank_(rank),
      wall_offset_us_(wall_minus_steady_us()) {}

Result<std::shared_ptr<Timeline>> Timeline::create(std::string prefix, int rank) {
  auto timeline = std::make_shared<Timeline>(std::move(prefix), rank);
  // Created (empty) now, written at the end: a path that cannot be written fails here.
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(timeline->path().c_str(), "w"),
                                             &std::fclose);
  if (!file)
    return make_error(PG_ERR_CONFIG, "PROCGROUP_TIMELINE: cannot write {}: {}", timeline->path(),
                      std::strerror(errno));
  return timeline;
}

Timeline::~Timeline() {
  Status written = flush();
  if (!written.ok()) log(kLogWarn, "timeline", "PROCGROUP_TIMELINE: {}", written.to_string());
}

int Timeline::add_track(std::string_view group_name) {
  std::lock_guard lock(mutex_);
  tracks_.emplace_back(group_name);
  return static_cast<int>(tracks_.size());  // tid 0 is left to the process itself
}

Timeline::Record& Timeline::append_locked() {
  const uint64_t id = next_id_++;
  if (ring_.size() < kCapacity) {
    ring_.emplace_back();
  }
  Record& r = ring_[(id - 1) % kCapacity];
  r = Record{};
  r.id = id;
  return r;
}

Timeline::Record* Timeline::find_locked(uint64_t id) {
  if (id == 0 || ring_.empty()) return nullptr;
  Record& r = ring_[(id - 1) % kCapacity];
  return r.id == id ? &r : nullptr;  // else overwritten: older than the last kCapacity
}

uint64_t Timeline::op_issued(int track, const OpLabel& label, Clock::time_point issued) {
  std::lock_guard lock(mutex_);
  Record& r = append_locked();
  r.is_op = true;
  r.track = track;
  r.phase_or_op = label.args.op;
  r.seq = label.seq;
  r.count = static_cast<int64_t>(label.args.n);
  r.dtype = label.args.dtype;
  r.bytes = label.args.op == PG_OP_BARRIER ? 0 : label.args.n * dtype_size(label.args.dtype);
  r.issued = issued;
  return r.id;
}

void Timeline::op_started(uint64_t id) {
  const Clock::time_point now = Clock::now();
  std::lock_guard lock(mutex_);
  if (Record* r = find_locked(id)) r->started = now;
}

void Timeline::op_ended(uint64_t id, pg_status_t status) {
  const Clock::time_point now = Clock::now();
  std::lock_guard lock(mutex_);
  if (Record* r = find_locked(id)) {
    r->ended = now;
    r->status = status;
  }
}

void Timeline::mark(int track, std::string_view category, std::string_view name, uint64_t id,
                    Phase phase, uint64_t bytes) {
  const Clock::time_point now = Clock::now();
  std::lock_guard lock(mutex_);
  Record& r = append_locked();
  r.track = track;
  r.phase_or_op = phase;
  r.seq = id;
  r.bytes = bytes;
  r.issued = now;
  copy_name(r.category, category);
  copy_name(r.name, name);
}

std::string Timeline::to_json() const {
  std::vector<Record> records;
  std::vector<std::string> tracks;
  uint64_t recorded;
  {
    std::lock_guard lock(mutex_);
    records = ring_;
    tracks = tracks_;
    recorded = next_id_ - 1;
  }
  std::sort(records.begin(), records.end(),
            [](const Record& a, const Record& b) { return a.id < b.id; });
  // Wall-clock microseconds, exact to the nanosecond in the text (a double would round).
  auto us = [&](Clock::time_point t) {
    const int64_t ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count() +
        wall_offset_us_ * 1000;
    return fmt::format("{}.{:03}", ns / 1000, ns % 1000);
  };
  std::string out = fmt::format(
      "{{\"displayTimeUnit\":\"ms\",\"otherData\":{{\"procgroup_timeline\":1,\"rank\":{},"
      "\"capacity\":{},\"dropped\":{}}},\"traceEvents\":[\n",
      rank_, kCapacity, recorded - records.size());
  const int pid = rank_;
  out += fmt::format(
      "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{0},\"tid\":0,\"args\":{{\"name\":"
      "\"rank {0}\"}}}},\n{{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":{0},\"tid\":0,"
      "\"args\":{{\"sort_index\":{0}}}}}",
      pid);
  for (size_t i = 0; i < tracks.size(); ++i) {
    out += fmt::format(
        ",\n{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":"
        "\"group {}\"}}}}",
        pid, i + 1, json_escape(tracks[i]));
  }
  // Async events (b/e/n, matched by cat and id): operations and buckets overlap, which
  // complete (X) events on one thread may not.
  auto event = [&](std::string_view name, std::string_view cat, char ph, uint64_t id, int tid,
                   Clock::time_point t, const std::string& args) {
    out += fmt::format(
        ",\n{{\"name\":\"{}\",\"cat\":\"{}\",\"ph\":\"{}\",\"id\":\"0x{:x}\",\"ts\":{},\"pid\":{},"
        "\"tid\":{},\"args\":{{{}}}}}",
        name, cat, ph, id, us(t), pid, tid, args);
  };
  for (const Record& r : records) {
    if (r.is_op) {
      const auto op = static_cast<pg_op_t>(r.phase_or_op);
      const std::string args =
          fmt::format("\"seq\":{},\"bytes\":{},\"count\":{},\"dtype\":\"{}\"", r.seq, r.bytes,
                      r.count, dtype_name(static_cast<pg_dtype_t>(r.dtype)));
      event(op_name(op), "op", 'b', r.id, r.track, r.issued, args);
      const bool ended = r.ended != Clock::time_point{};
      if (r.started != Clock::time_point{}) {
        event("running", "op", 'b', r.id, r.track, r.started, "");
        if (ended) event("running", "op", 'e', r.id, r.track, r.ended, "");
      }
      if (ended)
        event(op_name(op), "op", 'e', r.id, r.track, r.ended,
              fmt::format("\"status\":\"{}\"", status_name(r.status)));
    } else {
      const char ph = r.phase_or_op == kBegin ? 'b' : r.phase_or_op == kEnd ? 'e' : 'n';
      event(json_escape(r.name), json_escape(r.category), ph, r.seq, r.track, r.issued,
            fmt::format("\"bytes\":{}", r.bytes));
    }
  }
  out += "\n]}\n";
  return out;
}

Status Timeline::flush() {
  {
    std::lock_guard lock(mutex_);
    if (written_at_ == next_id_) return ok_status();
    written_at_ = next_id_;
  }
  const std::string json = to_json();
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path_.c_str(), "w"), &std::fclose);
  if (!file)
    return make_error(PG_ERR_CONFIG, "cannot write the timeline {}: {}", path_,
                      std::strerror(errno));
  if (std::fwrite(json.data(), 1, json.size(), file.get()) != json.size() ||
      std::fclose(file.release()) != 0)
    return make_error(PG_ERR_CONFIG, "cannot write the timeline {}: {}", path_,
                      std::strerror(errno));
  log(kLogInfo, "timeline", "wrote {}", path_);
  return ok_status();
}

OpTrace trace_op_issued(Timeline* timeline, int track, const OpLabel& label) {
  if (timeline == nullptr && !log_enabled(kLogDebug)) return {};
  OpTrace trace;
  trace.issued = Clock::now();
  if (timeline != nullptr) trace.timeline_id = timeline->op_issued(track, label, trace.issued);
  return trace;
}

void trace_op_started(Timeline* timeline, const OpTrace& trace) {
  if (timeline != nullptr && trace.timeline_id != 0) timeline->op_started(trace.timeline_id);
}

void trace_op_ended(Timeline* timeline, const OpTrace& trace, const OpLabel& label,
                    std::string_view group, const Status& status) {
  if (!trace.on()) return;
  if (timeline != nullptr && trace.timeline_id != 0)
    timeline->op_ended(trace.timeline_id, status.code());
  if (log_enabled(kLogDebug)) {
    const auto us =
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - trace.issued);
    const uint64_t bytes =
        label.args.op == PG_OP_BARRIER ? 0 : label.args.n * dtype_size(label.args.dtype);
    log(kLogDebug, "op", "group '{}' {} seq {} {} bytes {} in {} us", group, op_name(label.args.op),
        label.seq, bytes, status_name(status.code()), us.count());
  }
}

}  // namespace procgroup::detail
