// A rank for the multi-process tests. Creates the world group from the environment and
// runs one scenario; prints "ok" lines and exits 0, or prints the error and exits 1.
//   mp_worker collectives     every collective once, checked
//   mp_worker leave-early     rank 1 exits right after joining; the others run an allreduce
//   mp_worker two-groups      a second group from the same environment beside the world one
//   mp_worker next-group-early  rank 0 leaves the world group late; the others create the
//                             next group (named "world" again) before it has
//   mp_worker backend         a barrier, then "rank R backend NAME" (the backend chosen)
//   mp_worker scale           one checked allreduce; prints how long group creation took
//                             and this process's peak RSS ("scale: create_ms=... rss_kb=...")
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "../support/peak_rss.h"
#include "procgroup/procgroup.hpp"

namespace {

using procgroup::Group;
using procgroup::ReduceOp;

int check(bool good, const char* what, int rank) {
  std::printf("rank %d %s: %s\n", rank, what, good ? "ok" : "WRONG");
  return good ? 0 : 1;
}

int collectives(Group& g) {
  const int rank = g.rank(), size = g.size();
  int bad = 0;
  std::vector<int64_t> v(1000, rank + 1);
  g.allreduce(std::span(v)).wait();
  bad += check(v[999] == size * (size + 1) / 2, "allreduce", rank);

  std::vector<float> b(77, rank == 1 % size ? 3.5f : 0.0f);
  g.broadcast(std::span(b), 1 % size).wait();
  bad += check(b[76] == 3.5f, "broadcast", rank);

  std::vector<int32_t> mine(5, rank), all(5 * size);
  g.allgather(std::span<const int32_t>(mine), std::span(all)).wait();
  bool ok = true;
  for (int r = 0; r < size; ++r) ok &= all[5 * r + 4] == r;
  bad += check(ok, "allgather", rank);

  std::vector<double> in(3 * size, 1.0), out(3);
  g.reduce_scatter(std::span<const double>(in), std::span(out), ReduceOp::kAvg).wait();
  bad += check(out[2] == 1.0, "reduce_scatter avg", rank);

  std::vector<int32_t> send(size), recv(size);
  std::iota(send.begin(), send.end(), rank * 100);
  g.alltoall(std::span<const int32_t>(send), std::span(recv)).wait();
  ok = true;
  for (int r = 0; r < size; ++r) ok &= recv[r] == r * 100 + rank;
  bad += check(ok, "alltoall", rank);

  g.barrier().wait();
  return bad == 0 ? 0 : 1;
}

int leave_early(Group& g) {
  if (g.rank() == 1) {
    std::printf("rank 1 leaving without a word\n");
    std::fflush(stdout);
    std::_Exit(0);  // no destroy: as if the process crashed
  }
  std::vector<float> v(1 << 16, 1.0f);
  g.allreduce(std::span(v)).wait();  // must throw, not hang
  std::printf("rank %d allreduce unexpectedly succeeded\n", g.rank());
  return 1;
}

int sum_of_ranks(Group& g, const char* what) {
  std::vector<int32_t> v(3, g.rank() + 1);
  g.allreduce(std::span(v)).wait();
  return check(v[2] == g.size() * (g.size() + 1) / 2, what, g.rank());
}

Group named_from_env(const char* name) {
  pg_group_options_t options = PG_GROUP_OPTIONS_INIT;
  options.name = name;
  return Group(options);
}

// PyTorch programs keep an nccl and a gloo group side by side: same MASTER_PORT, one store.
int two_groups(Group& world) {
  Group second = named_from_env("second");
  int bad = sum_of_ranks(second, "second group allreduce");
  bad += sum_of_ranks(world, "world group allreduce");
  second.destroy();
  return bad;
}

// Rank 0 hosts the store; had it closed the store on leaving the first group, the others'
// next rendezvous (already connected to it) would break.
int next_group_early(Group& world) {
  int bad = sum_of_ranks(world, "first world allreduce");
  if (world.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  world.destroy();
  Group again = named_from_env("world");
  bad += sum_of_ranks(again, "next world allreduce");
  again.destroy();
  return bad;
}

using pgtest::peak_rss_kib;

int scale(Group& g, double create_ms) {
  const int64_t n = g.size();
  std::vector<int64_t> v(4096);
  for (size_t i = 0; i < v.size(); ++i) v[i] = (g.rank() + 1) * static_cast<int64_t>(i + 1);
  g.allreduce(std::span(v)).wait();
  bool ok = true;
  for (size_t i = 0; i < v.size(); ++i) ok &= v[i] == static_cast<int64_t>(i + 1) * n * (n + 1) / 2;
  g.barrier().wait();  // every rank's RSS includes a whole group's worth of traffic
  std::printf("rank %d scale: create_ms=%.0f rss_kb=%ld allreduce=%s\n", g.rank(), create_ms,
              peak_rss_kib(), ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "collectives";
  try {
    const auto start = std::chrono::steady_clock::now();
    Group g = Group::from_env();
    if (std::strcmp(mode, "scale") == 0) {
      const std::chrono::duration<double, std::milli> took =
          std::chrono::steady_clock::now() - start;
      const int rc = scale(g, took.count());
      g.destroy();
      return rc;
    }
    if (std::strcmp(mode, "backend") == 0) {
      g.barrier().wait();
      std::printf("rank %d backend %s\n", g.rank(), std::string(g.backend()).c_str());
      g.destroy();
      return 0;
    }
    if (std::strcmp(mode, "next-group-early") == 0) return next_group_early(g) == 0 ? 0 : 1;
    int rc = std::strcmp(mode, "leave-early") == 0  ? leave_early(g)
             : std::strcmp(mode, "two-groups") == 0 ? two_groups(g)
                                                    : collectives(g);
    g.destroy();
    return rc;
  } catch (const procgroup::Error& e) {
    std::printf("error %s: %s\n", pg_status_name(e.status()), e.what());
    return 1;
  }
}
