// The ucx plugin under test and a CPU clock for its direct tests (see ucx_test_support.h).
#include "ucx_test_support.h"

#include <ctime>

namespace procgroup::ucx_test {

const plugin_harness::PluginUnderTest& ucx_plugin() {
  static const pg_host_services_t host = plugin_harness::host_with_core_kernels();
  static const plugin_harness::PluginUnderTest plugin = {PG_UCX_PATH, &host, "ucx", 100};
  return plugin;
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace procgroup::ucx_test
