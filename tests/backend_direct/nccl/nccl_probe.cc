// One rank of nccl_api_test's multi-process check, started with RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR and MASTER_PORT like a torchrun/pgrun rank. It creates a group on
// the nccl backend over the loopback TCP store, which on a host without a CUDA device must
// fail promptly with PG_ERR_UNSUPPORTED and "no CUDA device"; then a gloo group named
// "after" in the same process must work (an allreduce). Prints one line, exits 0 when all
// of that held, 1 otherwise.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "procgroup/procgroup.h"

int main() {
  pg_group_options_t nccl = PG_GROUP_OPTIONS_INIT;
  nccl.backend = "nccl";
  nccl.timeout_ms = 60000;
  pg_group_t group = nullptr;
  const auto start = std::chrono::steady_clock::now();
  const pg_status_t st = pg_group_create(&nccl, &group);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string message = pg_last_error();
  if (st != PG_ERR_UNSUPPORTED || message.find("no CUDA device") == std::string::npos ||
      seconds > 20) {
    std::printf("nccl group: %s after %.1f s: %s\n", pg_status_name(st), seconds, message.c_str());
    if (group != nullptr) pg_group_destroy(group);
    return 1;
  }
  pg_group_options_t gloo = PG_GROUP_OPTIONS_INIT;
  gloo.backend = "gloo";
  gloo.name = "after";
  gloo.timeout_ms = 15000;  // if the other rank failed above, say so well before the test gives up
  if (pg_group_create(&gloo, &group) != PG_OK) {
    std::printf("gloo group after the nccl failure: %s\n", pg_last_error());
    return 1;
  }
  int32_t rank = 0, size = 0;
  pg_group_rank(group, &rank);
  pg_group_size(group, &size);
  int32_t x = rank + 1;
  pg_buffer_t b = pg_buffer_cpu(&x, 1, PG_DTYPE_I32);
  const pg_status_t ar = pg_allreduce(group, &b, &b, nullptr, nullptr);
  const bool ok = ar == PG_OK && x == size * (size + 1) / 2;
  std::printf("rank %d: nccl refused in %.1f s (%s); gloo allreduce %s (%d)\n", rank, seconds,
              message.c_str(), ok ? "ok" : pg_last_error(), x);
  pg_group_destroy(group);
  return ok ? 0 : 1;
}
