// A program that knows procgroup only as an installed package. Alone, it runs a one-rank
// group on the installed loopback plugin, which the installed libprocgroup must find in
// lib/procgroup/ without any path set. Under a launcher (WORLD_SIZE set) it runs on
// whatever PROCGROUP_BACKEND names, e.g. an out-of-tree plugin, and checks a few
// collectives the core builds for a send/recv-only plugin.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <procgroup/procgroup.hpp>
#include <vector>

namespace {

procgroup::Group make_group() {
  if (std::getenv("WORLD_SIZE") != nullptr) return procgroup::Group::from_env();
  pg_group_options_t options = PG_GROUP_OPTIONS_INIT;
  options.size = 1;
  options.backend = "loopback";
  return procgroup::Group(options);
}

}  // namespace

int main() {
  try {
    procgroup::Group group = make_group();
    const int rank = group.rank(), size = group.size();
    bool ok = true;

    std::vector<float> v(1000, static_cast<float>(rank + 1));
    group.allreduce(std::span(v), procgroup::ReduceOp::kAvg).wait();
    ok = ok && v[999] == (size + 1) / 2.0f;

    std::vector<int> mine(3, rank), all(3 * size, -1);
    group.allgather(std::span<const int>(mine), std::span(all)).wait();
    for (int r = 0; r < size; ++r) ok = ok && all[3 * r] == r && all[3 * r + 2] == r;

    group.barrier().wait();
    const pg_capabilities_t caps = group.capabilities();
    std::printf("consumer: %s %s (rank %d of %d, native ops 0x%x)\n", group.backend().data(),
                ok ? "ok" : "WRONG", rank, size, caps.native_ops);
    group.destroy();
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
