// Runs one allreduce on a single-rank group over the installed loopback plugin, which
// the installed libprocgroup must find in lib/procgroup/ without any path set.
#include <cstdio>
#include <vector>

#include <procgroup/procgroup.hpp>

int main() {
  pg_group_options_t options = PG_GROUP_OPTIONS_INIT;
  options.size = 1;
  options.backend = "loopback";
  procgroup::Group group(options);
  std::vector<float> v(16, 2.0f);
  group.allreduce(std::span(v), procgroup::ReduceOp::kAvg).wait();
  std::printf("consumer: %s %s\n", group.backend().data(), v[15] == 2.0f ? "ok" : "WRONG");
  return v[15] == 2.0f ? 0 : 1;
}
