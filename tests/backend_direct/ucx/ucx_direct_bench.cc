// ucx_direct_bench — times the ucx plugin through its function table, without libprocgroup,
// so a collbench result can be split into the core's share and the plugin's (as
// bench/core_overhead does for loopback). Ranks are forked processes on this host.
//
//   ucx_direct_bench [ranks] [min_bytes] [max_bytes] [iterations]
//
// Prints, per f32 allreduce size: the median time of one blocking op (issue + wait +
// release), the issue call alone, the bus bandwidth (2 (p-1)/p * bytes / time), and the
// mean and longest op (the mean, outliers included, is what collbench reports).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "ucx_test_support.h"

namespace procgroup::ucx_test {
namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int rank_main(int rank, int size, const std::string& dir, uint64_t min_bytes, uint64_t max_bytes,
              int iters) {
  Plugin plugin;
  if (plugin.status() != PG_OK) return 2;
  FileStore store(dir, 60000);
  RankEnv env;
  env.rank = rank;
  env.size = size;
  env.ops = &plugin.ops();
  if (create_group(plugin.ops(), store, rank, size, 60000, &env.group) != PG_OK) return 3;
  if (rank == 0) {
    std::printf("# f32 allreduce through the ucx plugin's table, %d ranks, median of %d\n", size,
                iters);
    std::printf("# %12s %12s %12s %12s %12s %12s\n", "bytes", "op (us)", "issue (us)",
                "busbw (GB/s)", "mean op (us)", "max op (us)");
  }
  for (uint64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    const uint64_t n = std::max<uint64_t>(1, bytes / 4);
    std::vector<float> data(n, 1.0f);
    pg_buffer_t b = cpu(data.data(), n, PG_DTYPE_F32);
    const pg_backend_op_t op = make_op(PG_OP_ALLREDUCE, b, b);
    const int count = bytes <= (64u << 10) ? iters : std::max(5, iters / 20);
    std::vector<double> total, issue;
    for (int i = 0; i < count + count / 10 + 2; ++i) {
      const auto t0 = Clock::now();
      Work w = env.start(op);
      const auto t1 = Clock::now();
      if (w.wait() != PG_OK) return 4;
      w.release();
      const auto t2 = Clock::now();
      if (i < count / 10 + 2) continue;  // warm-up
      total.push_back(std::chrono::duration<double, std::micro>(t2 - t0).count());
      issue.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    const double us = median(total);
    if (rank == 0) {
      const double mean = std::accumulate(total.begin(), total.end(), 0.0) / total.size();
      std::printf("  %12llu %12.2f %12.2f %12.2f %12.2f %12.1f\n",
                  static_cast<unsigned long long>(n * 4), us, median(issue),
                  2.0 * (size - 1) / size * n * 4 / us / 1e3, mean,
                  *std::max_element(total.begin(), total.end()));
      std::fflush(stdout);
    }
  }
  return plugin.ops().group_destroy(env.group) == PG_OK ? 0 : 5;
}

}  // namespace
}  // namespace procgroup::ucx_test

int main(int argc, char** argv) {
  using namespace procgroup::ucx_test;
  const int size = argc > 1 ? std::atoi(argv[1]) : 2;
  const uint64_t min_bytes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 8;
  const uint64_t max_bytes = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 8;
  const int iters = argc > 4 ? std::atoi(argv[4]) : 20000;
  std::string dir = (std::filesystem::temp_directory_path() / "pg-ucx-bench-XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) return 1;
  std::vector<pid_t> pids;
  for (int r = 0; r < size; ++r) {
    const pid_t pid = fork();
    if (pid == 0) _exit(rank_main(r, size, dir, min_bytes, max_bytes, iters));
    pids.push_back(pid);
  }
  int rc = 0;
  for (pid_t pid : pids) {
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = 1;
  }
  std::filesystem::remove_all(dir);
  return rc;
}
