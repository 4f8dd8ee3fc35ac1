// Table, CSV and JSON output of the collective benchmarks (see report.h).
#include "report.h"

#include <fmt/format.h>

#include <cstdio>
#include <ctime>
#include <fstream>

namespace procgroup::bench {
namespace {

// nccl-tests' time format: fewer decimals as the number grows, always 8 wide.
std::string format_time(double us) {
  if (us >= 10000.0) return fmt::format("{:8.0f}", us);
  if (us >= 100.0) return fmt::format("{:8.1f}", us);
  return fmt::format("{:8.2f}", us);
}

std::string format_wrong(int64_t wrong) { return wrong < 0 ? "n/a" : std::to_string(wrong); }

std::string measurement_cells(const std::optional<Measurement>& m) {
  if (!m) return fmt::format("  {:>8}  {:>7}  {:>7}  {:>6}", "n/a", "n/a", "n/a", "n/a");
  return fmt::format("  {}  {:7.2f}  {:7.2f}  {:>6}", format_time(m->time_us), m->algbw, m->busbw,
                     format_wrong(m->wrong));
}

// procgroup's busbw over the raw library's, computed from algbw: the same ratio (both carry
// the collective's factor), and still defined on one rank, where that factor and busbw are 0.
double ratio(const Row& r) {
  return r.direct && r.direct->algbw > 0 ? r.out_of_place.algbw / r.direct->algbw : 0.0;
}

// What procgroup adds to one operation's time over the raw library (out of place).
double added_us(const Row& r) {
  return r.direct ? r.out_of_place.time_us - r.direct->time_us : 0.0;
}

const char* aggregate_text(TimeAggregate a) {
  switch (a) {
    case TimeAggregate::kRank0: return "rank 0's";
    case TimeAggregate::kAvg: return "mean over ranks";
    case TimeAggregate::kMin: return "min over ranks";
    case TimeAggregate::kMax: return "max over ranks (the slowest rank)";
  }
  return "";
}

std::string joined_names(const Options& o) {
  std::string d, r;
  for (Dtype t : o.dtypes) d += (d.empty() ? "" : ",") + std::string(dtype_name(t));
  for (RedOp op : o.redops) r += (r.empty() ? "" : ",") + std::string(redop_name(op));
  return fmt::format("dtype {}, redop {}", d, reduces(o.op) ? r : "none");
}

nlohmann::json measurement_json(const std::optional<Measurement>& m) {
  if (!m) return nullptr;
  nlohmann::json j = {{"time_us", m->time_us}, {"algbw_gbps", m->algbw}, {"busbw_gbps", m->busbw}};
  j["wrong"] = m->wrong < 0 ? nlohmann::json(nullptr) : nlohmann::json(m->wrong);
  return j;
}

std::string csv_cells(const std::optional<Measurement>& m, bool with_algbw) {
  if (!m) return with_algbw ? ",,," : ",,";
  std::string cells = fmt::format("{:.3f},", m->time_us);
  if (with_algbw) cells += fmt::format("{:.6f},", m->algbw);
  cells += fmt::format("{:.6f},{}", m->busbw, m->wrong < 0 ? "" : std::to_string(m->wrong));
  return cells;
}

}  // namespace

std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++u;
  }
  return fmt::format("{} {}", bytes, units[u]);
}

Reporter::Reporter(RunInfo info, bool prints) : info_(std::move(info)), prints_(prints) {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  date_ = text;
}

void Reporter::header() const {
  if (!prints_) return;
  const Options& o = info_.options;
  std::string out;
  const std::string buffers = info_.buffers.empty() ? "" : ", " + info_.buffers + " buffers";
  out += fmt::format("# {} {}: backend {}, {} ranks{}, {}, root {}\n", info_.tool, coll_name(o.op),
                     info_.backend, info_.world_size, buffers, joined_names(o),
                     rooted(o.op) ? std::to_string(o.root) : "none");
  out += fmt::format("# {} {}, {}{}\n", info_.tool, PG_BENCH_VERSION, date_,
                     info_.backend_detail.empty() ? "" : "; " + info_.backend_detail);
  out +=
      fmt::format("# sizes {} to {} (x{}); {} warmup + {} timed iterations per size; {}\n",
                  format_bytes(o.min_bytes), format_bytes(o.max_bytes), o.factor, o.warmup, o.iters,
                  o.blocking ? "each operation waited for before the next (-z 1)"
                             : "all iterations issued, then waited for (-z 0)");
  out += fmt::format("# time: mean per operation after a barrier, {}; check {}\n",
                     aggregate_text(o.aggregate), o.check ? "on: every element" : "off");
  if (!info_.direct_name.empty()) {
    const std::string what =
        info_.direct_detail.empty()
            ? "a raw " + info_.direct_name + " context (own TCP device, same algorithm)"
            : info_.direct_detail;
    out += fmt::format(
        "# direct: the same out-of-place operation on {}; ratio = busbw procgroup / busbw {}, "
        "+time = time procgroup - time {}\n",
        what, info_.direct_name, info_.direct_name);
  }
  if (o.reference) {
    out +=
        "# reference: this machine's memory at each size, every rank at once, timed and "
        "aggregated as the operations: memcpy and f32 reduce-into (dst[i] += src[i]) of size "
        "bytes, GB/s of size\n";
  }
  for (const RankPlace& r : ranks_) {
    out += fmt::format("#  Rank {:2d} Group  0 Pid {:6d} on {:>10} device {}\n", r.rank, r.pid,
                       r.host, r.device);
  }
  out += "#\n";
  std::string groups = fmt::format("# {:>10}  {:>12}  {:>6}  {:>6}  {:>6}", "", "", "", "", "");
  std::string names = fmt::format("# {:>10}  {:>12}  {:>6}  {:>6}  {:>6}", "size", "count", "type",
                                  "redop", "root");
  std::string units =
      fmt::format("# {:>10}  {:>12}  {:>6}  {:>6}  {:>6}", "(B)", "(elements)", "", "", "");
  const std::string meas_names =
      fmt::format("  {:>8}  {:>7}  {:>7}  {:>6}", "time", "algbw", "busbw", "#wrong");
  const std::string meas_units =
      fmt::format("  {:>8}  {:>7}  {:>7}  {:>6}", "(us)", "(GB/s)", "(GB/s)", "");
  groups += fmt::format("  {:^34}  {:^34}", "out-of-place", "in-place");
  names += meas_names + meas_names;
  units += meas_units + meas_units;
  if (!info_.direct_name.empty()) {
    groups += fmt::format("  {:^44}", info_.direct_name + " direct (out-of-place)");
    names += fmt::format("  {:>8}  {:>7}  {:>6}  {:>7}  {:>8}", "time", "busbw", "#wrong", "ratio",
                         "+time");
    units +=
        fmt::format("  {:>8}  {:>7}  {:>6}  {:>7}  {:>8}", "(us)", "(GB/s)", "", "pg/raw", "(us)");
  }
  if (o.reference) {
    groups += fmt::format("  {:^17}", "reference");
    names += fmt::format("  {:>7}  {:>7}", "memcpy", "reduce");
    units += fmt::format("  {:>7}  {:>7}", "(GB/s)", "(GB/s)");
  }
  out += groups + "\n" + names + "\n" + units + "\n";
  std::fputs(out.c_str(), stdout);
  std::fflush(stdout);
}

void Reporter::row(const Row& r) {
  rows_.push_back(r);
  if (!prints_) return;
  std::string line =
      fmt::format("{:>12}  {:>12}  {:>6}  {:>6}  {:>6}", r.bytes, r.count, dtype_name(r.dtype),
                  r.redop ? redop_name(*r.redop) : "none", r.root);
  line += measurement_cells(r.out_of_place) + measurement_cells(r.in_place);
  if (r.direct) {
    line += fmt::format("  {}  {:7.2f}  {:>6}  {:7.3f}  {:8.2f}", format_time(r.direct->time_us),
                        r.direct->busbw, format_wrong(r.direct->wrong), ratio(r), added_us(r));
  }
  if (r.reference) {
    line += fmt::format("  {:7.2f}  {:7.2f}", r.reference->memcpy_gbps, r.reference->reduce_gbps);
  }
  std::puts(line.c_str());
  std::fflush(stdout);
}

void Reporter::note(const std::string& text) const {
  if (prints_) std::printf("# %s\n", text.c_str());
}

void Reporter::summary() const {
  if (!prints_) return;
  double sum = 0, direct_sum = 0;
  int n = 0, direct_n = 0;
  for (const Row& r : rows_) {
    sum += r.out_of_place.busbw;
    ++n;
    if (r.in_place) {
      sum += r.in_place->busbw;
      ++n;
    }
    if (r.direct) {
      direct_sum += r.direct->busbw;
      ++direct_n;
    }
  }
  const int64_t wrong = total_wrong();
  std::printf("# Wrong elements    : %lld (%s)\n", static_cast<long long>(wrong),
              !info_.options.check ? "not checked"
              : wrong == 0         ? "OK"
                                   : "FAILED");
  std::printf(
      "# Avg bus bandwidth : %.4f GB/s (mean busbw of every row, out-of-place and "
      "in-place)\n",
      n > 0 ? sum / n : 0.0);
  if (direct_n > 0) {
    std::printf("# Avg bus bandwidth, %s direct : %.4f GB/s (out-of-place)\n",
                info_.direct_name.c_str(), direct_sum / direct_n);
  }
  std::fflush(stdout);
}

int64_t Reporter::total_wrong() const {
  int64_t total = 0;
  for (const Row& r : rows_) {
    for (const auto& m : {std::optional(r.out_of_place), r.in_place, r.direct}) {
      if (m && m->wrong > 0) total += m->wrong;
    }
  }
  return total;
}

nlohmann::json Reporter::to_json() const {
  const Options& o = info_.options;
  nlohmann::json rows = nlohmann::json::array();
  for (const Row& r : rows_) {
    nlohmann::json j = {{"size_bytes", r.bytes},
                        {"count", r.count},
                        {"dtype", dtype_name(r.dtype)},
                        {"redop", r.redop ? redop_name(*r.redop) : "none"},
                        {"root", r.root},
                        {"out_of_place", measurement_json(r.out_of_place)},
                        {"in_place", measurement_json(r.in_place)}};
    if (r.direct) {
      j["direct"] = measurement_json(r.direct);
      j["ratio_busbw"] = ratio(r);
      j["added_us"] = added_us(r);
    }
    if (r.reference) {
      j["reference"] = {{"memcpy_gbps", r.reference->memcpy_gbps},
                        {"reduce_f32_gbps", r.reference->reduce_gbps}};
    }
    rows.push_back(std::move(j));
  }
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankPlace& r : ranks_) {
    ranks.push_back({{"rank", r.rank}, {"pid", r.pid}, {"host", r.host}, {"device", r.device}});
  }
  return {{"tool", info_.tool},
          {"version", PG_BENCH_VERSION},
          {"date", date_},
          {"host", ranks_.empty() ? "" : ranks_.front().host},
          {"ranks", std::move(ranks)},
          {"backend", info_.backend},
          {"backend_detail", info_.backend_detail},
          {"direct",
           info_.direct_name.empty() ? nlohmann::json(nullptr) : nlohmann::json(info_.direct_name)},
          {"buffers", info_.buffers.empty() ? "host" : info_.buffers},
          {"op", coll_name(o.op)},
          {"world_size", info_.world_size},
          {"min_bytes", o.min_bytes},
          {"max_bytes", o.max_bytes},
          {"step_factor", o.factor},
          {"iters", o.iters},
          {"warmup_iters", o.warmup},
          {"check", o.check},
          {"blocking", o.blocking},
          {"reference", o.reference},
          {"time_aggregate", static_cast<int>(o.aggregate)},
          {"rows", std::move(rows)},
          {"wrong_total", total_wrong()}};
}

std::string Reporter::to_csv() const {
  std::string out =
      "tool,backend,world_size,op,size_bytes,count,dtype,redop,root,"
      "oop_time_us,oop_algbw_gbps,oop_busbw_gbps,oop_wrong,"
      "ip_time_us,ip_algbw_gbps,ip_busbw_gbps,ip_wrong,"
      "direct_time_us,direct_busbw_gbps,direct_wrong,ratio_busbw,added_us,"
      "memcpy_gbps,reduce_f32_gbps\n";
  for (const Row& r : rows_) {
    out += fmt::format("{},{},{},{},{},{},{},{},{},", info_.tool, info_.backend, info_.world_size,
                       coll_name(r.op), r.bytes, r.count, dtype_name(r.dtype),
                       r.redop ? redop_name(*r.redop) : "none", r.root);
    out += csv_cells(r.out_of_place, true) + "," + csv_cells(r.in_place, true) + ",";
    out += csv_cells(r.direct, false) + ",";
    out += r.direct ? fmt::format("{:.4f},{:.3f},", ratio(r), added_us(r)) : ",,";
    out += r.reference
               ? fmt::format("{:.6f},{:.6f}", r.reference->memcpy_gbps, r.reference->reduce_gbps)
               : ",";
    out += "\n";
  }
  return out;
}

bool Reporter::write_files(const std::string& csv_path, const std::string& json_path) const {
  bool ok = true;
  auto write = [&](const std::string& path, const std::string& text) {
    if (path.empty()) return;
    std::ofstream f(path, std::ios::trunc);
    f << text;
    f.close();
    if (!f) {
      std::fprintf(stderr, "%s: cannot write %s\n", info_.tool.c_str(), path.c_str());
      ok = false;
    }
  };
  write(csv_path, to_csv());
  write(json_path, to_json().dump(2) + "\n");
  return ok;
}

}  // namespace procgroup::bench
