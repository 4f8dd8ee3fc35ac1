// A program that knows procgroup only as an installed package. Alone, it runs a one-rank
// group on the installed loopback plugin, which the installed libprocgroup must find in
// lib/procgroup/ without any path set. Under a launcher (WORLD_SIZE set) it runs on
// whatever PROCGROUP_BACKEND names, e.g. an out-of-tree plugin, and checks a few
// collectives the core builds for a send/recv-only plugin.
#include <chrono>
#include <cstdint>
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

    // One version story: the package's, the header's and the library's agree.
    uint32_t major = 0, minor = 0;
    procgroup::check(pg_get_version(&major, &minor));
    if (major != PG_ABI_VERSION_MAJOR || minor != PG_ABI_VERSION_MINOR ||
        major != PACKAGE_VERSION_MAJOR || minor != PACKAGE_VERSION_MINOR) {
      std::fprintf(stderr, "consumer: library %u.%u, header %d.%d, package %d.%d\n", major,
                   minor, PG_ABI_VERSION_MAJOR, PG_ABI_VERSION_MINOR, PACKAGE_VERSION_MAJOR,
                   PACKAGE_VERSION_MINOR);
      return 1;
    }

    // Containers as they are, and a per-operation timeout.
    std::vector<float> v(1000, static_cast<float>(rank + 1));
    group.allreduce(v, procgroup::ReduceOp::kAvg, {.timeout = std::chrono::seconds(20)}).wait();
    ok = ok && v[999] == (size + 1) / 2.0f;

    const std::vector<int> mine(3, rank);
    std::vector<int> all(3 * size, -1);
    group.allgather(mine, all).wait();
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
