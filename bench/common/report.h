// report.h — the one way the collective benchmarks print results: an nccl-tests-style table
// on stdout (rank 0), and the same rows as CSV and JSON files for scripts and plots.
//
//   Reporter rep(info, rank == 0);
//   rep.header();
//   rep.row(row);                      // printed at once, kept for the files
//   rep.summary();
//   bool ok = rep.write_files(options.csv_path, options.json_path);   // rank 0
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench_types.h"
#include "options.h"

namespace procgroup::bench {

// One timed loop: the mean time per operation and the bandwidths it gives.
struct Measurement {
  double time_us = 0;
  double algbw = 0;    // GB/s: size / time
  double busbw = 0;    // GB/s: algbw * the collective's factor
  int64_t wrong = -1;  // elements wrong, summed over ranks; -1: not checked
};

// --reference: this machine's memory at the row's size, every rank at once (runner.h).
struct Reference {
  double memcpy_gbps = 0;  // size bytes copied per second (10^9)
  double reduce_gbps = 0;  // size bytes of f32 reduced into (dst[i] += src[i]) per second
};

struct Row {
  Coll op;
  Dtype dtype;
  std::optional<RedOp> redop;  // reducing collectives only
  int root = -1;               // rooted collectives only
  uint64_t bytes = 0;          // the size column (layout.h)
  uint64_t count = 0;          // per-rank element count of the call
  Measurement out_of_place;
  std::optional<Measurement> in_place;  // absent for sendrecv
  std::optional<Measurement> direct;    // --direct: the raw library, out of place
  std::optional<Reference> reference;   // --reference
};

struct RunInfo {
  std::string tool;            // "collbench", "mpi_collbench"
  std::string backend;         // "gloo", "mpi"
  std::string backend_detail;  // e.g. the MPI library version; may be empty
  std::string direct_name;     // non-empty with --direct: "gloo"
  int world_size = 0;
  Options options;
  std::string buffers{};        // where the buffers live ("host", "cuda:0 (...)"); empty: not said
  std::string direct_detail{};  // the header's account of the direct engine; empty: raw Gloo's
};

// Where one rank runs: nccl-tests' "#  Rank  0 Group  0 Pid 1234 on host device ..." line.
struct RankPlace {
  int rank = 0;
  int pid = 0;
  std::string host;
  std::string device;  // "cpu", "cuda:0 (NVIDIA H100 ...)"
};

class Reporter {
 public:
  Reporter(RunInfo info, bool prints);

  // Every rank's place, in rank order, for the header and the JSON (rank 0's host is "host").
  void set_ranks(std::vector<RankPlace> ranks) { ranks_ = std::move(ranks); }

  void header() const;
  void row(const Row& row);
  void note(const std::string& text) const;  // a "# text" line
  void summary() const;
  // Writes the CSV and JSON files that were asked for (empty path: none). False, with a
  // message on stderr, when a file cannot be written.
  bool write_files(const std::string& csv_path, const std::string& json_path) const;

  int64_t total_wrong() const;  // over every checked measurement
  nlohmann::json to_json() const;
  std::string to_csv() const;

 private:
  RunInfo info_;
  bool prints_;
  std::string date_;  // when the run started, ISO 8601 UTC
  std::vector<RankPlace> ranks_;
  std::vector<Row> rows_;
};

// "8 B", "64 KiB", "256 MiB": exact powers of 1024 get a unit, other sizes stay in bytes.
std::string format_bytes(uint64_t bytes);

}  // namespace procgroup::bench
