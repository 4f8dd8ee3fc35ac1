// soak: many mixed collectives with random sizes and in-flight depths, checking every
// result and the process's memory. Run it as a job (same seed on every rank, so every rank
// draws the same sequence):
//
//   pgrun --nproc-per-node 2 build/bin/soak                 # the short default (CI)
//   pgrun --nproc-per-node 2 build/bin/soak --full          # 100,000 operations
//   soak [--ops N] [--seed S] [--max-bytes B] [--max-depth D] [--rss-growth-mb M]
//
// Each step issues 1..D operations at once (allreduce sum/max, broadcast, allgather,
// reduce_scatter, alltoall, barrier; 0..B bytes, f32/i32/i64), waits for all, and checks a
// few elements of each result. RSS is sampled after the first 10% of the operations (the
// allocator has seen every size by then), at half way and at the end, each time right after
// a batch completed (its buffers still allocated). Each rank prints
//   SOAK rank=R ops=N errors=E rss_start_kb=.. rss_mid_kb=.. rss_end_kb=.. seconds=..
// and exits 1 on any error, or if RSS grew by more than M MiB from start to end.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "procgroup/procgroup.h"
// After procgroup.h: only the common types are needed.
#include "procgroup/backend_kit/dtype.hpp"

namespace {

struct Options {
  int64_t ops = 3000;
  uint64_t seed = 1;
  int64_t max_bytes = 1 << 20;
  int max_depth = 8;
  int64_t rss_growth_mb = 32;
};

enum class Kind {
  kAllreduceSum,
  kAllreduceMax,
  kBroadcast,
  kAllgather,
  kReduceScatter,
  kAlltoall,
  kBarrier,
  kCount
};

struct Step {
  Kind kind;
  pg_dtype_t dtype;
  uint64_t n;  // elements per rank
  int root;
};

// One operation in flight: its buffers stay alive until it is checked.
struct InFlight {
  Step step;
  std::vector<int64_t> in, out;  // int64 storage: aligned for every dtype used
  pg_work_t work = nullptr;
};

int64_t rss_kb() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

// The value rank r contributes at element i: small integers, exact in f32 sums.
double value(int r, uint64_t i) { return static_cast<double>((r + 1) * ((i % 7) + 1)); }

void put(std::vector<int64_t>& buf, pg_dtype_t t, uint64_t i, double v) {
  if (t == PG_DTYPE_F32) reinterpret_cast<float*>(buf.data())[i] = static_cast<float>(v);
  if (t == PG_DTYPE_I32) reinterpret_cast<int32_t*>(buf.data())[i] = static_cast<int32_t>(v);
  if (t == PG_DTYPE_I64) buf[i] = static_cast<int64_t>(v);
}

double get(const std::vector<int64_t>& buf, pg_dtype_t t, uint64_t i) {
  if (t == PG_DTYPE_F32) return reinterpret_cast<const float*>(buf.data())[i];
  if (t == PG_DTYPE_I32) return reinterpret_cast<const int32_t*>(buf.data())[i];
  return static_cast<double>(buf[i]);
}

Step draw(std::mt19937_64& rng, const Options& o, int size) {
  static const pg_dtype_t kDtypes[] = {PG_DTYPE_F32, PG_DTYPE_I32, PG_DTYPE_I64};
  Step s;
  s.kind = static_cast<Kind>(rng() % static_cast<int>(Kind::kCount));
  s.dtype = kDtypes[rng() % 3];
  // Log-uniform sizes: as many small operations as large ones.
  const double log_max = std::log2(static_cast<double>(std::max<int64_t>(o.max_bytes, 8)));
  const double bytes = std::exp2(std::uniform_real_distribution<double>(0, log_max)(rng));
  s.n = static_cast<uint64_t>(bytes) / procgroup::kit::dtype_size(s.dtype) / static_cast<uint64_t>(size);
  s.root = static_cast<int>(rng() % static_cast<uint64_t>(size));
  return s;
}

pg_status_t issue(pg_group_t g, InFlight& f, int rank, int size) {
  const Step& s = f.step;
  const uint64_t total = s.n * static_cast<uint64_t>(size);
  const size_t words = (total * procgroup::kit::dtype_size(s.dtype) + 7) / 8 + 1;
  f.in.assign(words, 0);
  f.out.assign(words, 0);
  for (uint64_t i = 0; i < total; ++i) put(f.in, s.dtype, i, value(rank, i));
  auto buf = [&](std::vector<int64_t>& v, uint64_t n) {
    return pg_buffer_cpu(v.data(), n, s.dtype);
  };
  pg_buffer_t in_n = buf(f.in, s.n), out_n = buf(f.out, s.n);
  pg_buffer_t in_all = buf(f.in, total), out_all = buf(f.out, total);
  pg_op_options_t o = PG_OP_OPTIONS_INIT;
  o.root = s.root;
  switch (s.kind) {
    case Kind::kAllreduceSum: return pg_allreduce(g, &in_n, &out_n, &o, &f.work);
    case Kind::kAllreduceMax:
      o.reduce_op = PG_REDUCE_MAX;
      return pg_allreduce(g, &in_n, &out_n, &o, &f.work);
    case Kind::kBroadcast: return pg_broadcast(g, &in_n, &out_n, &o, &f.work);
    case Kind::kAllgather: return pg_allgather(g, &in_n, &out_all, &o, &f.work);
    case Kind::kReduceScatter: return pg_reduce_scatter(g, &in_all, &out_n, &o, &f.work);
    case Kind::kAlltoall: return pg_alltoall(g, &in_all, &out_all, &o, &f.work);
    default: return pg_barrier(g, &o, &f.work);
  }
}

// Checks the first, a middle and the last element of the result.
bool check(const InFlight& f, int rank, int size) {
  const Step& s = f.step;
  if (s.n == 0 || s.kind == Kind::kBarrier) return true;
  const uint64_t probes[] = {0, s.n / 2, s.n - 1};
  for (uint64_t i : probes) {
    double want = 0;
    switch (s.kind) {
      case Kind::kAllreduceSum:
        for (int r = 0; r < size; ++r) want += value(r, i);
        break;
      case Kind::kAllreduceMax: want = value(size - 1, i); break;
      case Kind::kBroadcast: want = value(s.root, i); break;
      case Kind::kAllgather:  // block r holds rank r's elements
        if (get(f.out, s.dtype, (size - 1) * s.n + i) != value(size - 1, i)) return false;
        want = value(0, i);
        break;
      case Kind::kReduceScatter: {  // this rank's block of the sums
        const uint64_t at = static_cast<uint64_t>(rank) * s.n + i;
        for (int r = 0; r < size; ++r) want += value(r, at);
        break;
      }
      case Kind::kAlltoall: {  // block r came from rank r, its block `rank`
        const uint64_t from_last = static_cast<uint64_t>(rank) * s.n + i;
        if (get(f.out, s.dtype, (size - 1) * s.n + i) != value(size - 1, from_last)) return false;
        want = value(0, static_cast<uint64_t>(rank) * s.n + i);
        break;
      }
      default: break;
    }
    if (get(f.out, s.dtype, i) != want) return false;
  }
  return true;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "0";
    if (a == "--full") {
      o.ops = 100000;
      continue;
    }
    if (a == "--ops")
      o.ops = std::atoll(v);
    else if (a == "--seed")
      o.seed = std::strtoull(v, nullptr, 10);
    else if (a == "--max-bytes")
      o.max_bytes = std::atoll(v);
    else if (a == "--max-depth")
      o.max_depth = std::max(1, std::atoi(v));
    else if (a == "--rss-growth-mb")
      o.rss_growth_mb = std::atoll(v);
    else {
      std::fprintf(stderr, "soak: unknown argument %s\n", a.c_str());
      std::exit(2);
    }
    ++i;
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  pg_group_t g = nullptr;
  if (pg_group_create(nullptr, &g) != PG_OK) {
    std::fprintf(stderr, "soak: %s\n", pg_last_error());
    return 1;
  }
  int32_t rank = 0, size = 1;
  pg_group_rank(g, &rank);
  pg_group_size(g, &size);
  std::mt19937_64 rng(o.seed);
  const auto start = std::chrono::steady_clock::now();
  int64_t done = 0, errors = 0, rss_start = 0, rss_mid = 0;
  std::vector<InFlight> flight(static_cast<size_t>(o.max_depth));
  while (done < o.ops && errors == 0) {
    const int depth = 1 + static_cast<int>(rng() % static_cast<uint64_t>(o.max_depth));
    const int batch = static_cast<int>(std::min<int64_t>(depth, o.ops - done));
    for (int k = 0; k < batch; ++k) {
      flight[k].step = draw(rng, o, size);
      if (issue(g, flight[k], rank, size) != PG_OK) {
        std::fprintf(stderr, "soak rank %d: op %" PRId64 ": %s\n", rank, done + k, pg_last_error());
        ++errors;
        flight[k].work = nullptr;
      }
    }
    for (int k = 0; k < batch; ++k) {
      if (flight[k].work == nullptr) continue;
      const pg_status_t st = pg_work_wait(flight[k].work, -1);
      if (st != PG_OK) {
        std::fprintf(stderr, "soak rank %d: op %" PRId64 ": %s\n", rank, done + k, pg_last_error());
        ++errors;
      } else if (!check(flight[k], rank, size)) {
        std::fprintf(stderr,
                     "soak rank %d: op %" PRId64 " (kind %d, n %" PRIu64 "): wrong result\n", rank,
                     done + k, static_cast<int>(flight[k].step.kind), flight[k].step.n);
        ++errors;
      }
      pg_work_release(flight[k].work);
      flight[k].work = nullptr;
    }
    const int64_t before = done;
    done += batch;
    if (before < o.ops / 10 && done >= o.ops / 10) rss_start = rss_kb();
    if (before < o.ops / 2 && done >= o.ops / 2) rss_mid = rss_kb();
  }
  const int64_t rss_end = rss_kb();  // as the other samples: the last batch's buffers live
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  pg_group_destroy(g);
  const int64_t growth_kb = rss_end - rss_start;
  const bool grew = rss_start > 0 && growth_kb > o.rss_growth_mb * 1024;
  std::printf(
      "SOAK rank=%d ops=%" PRId64 " errors=%" PRId64 " rss_start_kb=%" PRId64 " rss_mid_kb=%" PRId64
      " rss_end_kb=%" PRId64 " growth_kb=%" PRId64 " seconds=%.2f%s\n",
      rank, done, errors, rss_start, rss_mid, rss_end, growth_kb, seconds, grew ? " RSS_GREW" : "");
  return errors == 0 && !grew ? 0 : 1;
}
