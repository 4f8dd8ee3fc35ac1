// The ucx plugin under test and a CPU clock for its direct tests (see ucx_test_support.h).
#include "ucx_test_support.h"

#include <ctime>

#include "collectives/reduce.h"

namespace procgroup::ucx_test {
namespace {

// The core's own kernels (compiled in from pg_collectives), as libprocgroup's host services
// hand them to the plugin, failures reported through the harness's set_error.
pg_status_t reported(const detail::Status& st) {
  if (!st.ok()) direct::internal::host_set_error(nullptr, st.message().c_str());
  return st.code();
}

pg_status_t core_reduce(void*, void* inout, const void* in, uint64_t count, pg_dtype_t dtype,
                        pg_reduce_op_t op) {
  return reported(detail::reduce_into(inout, in, count, dtype, op));
}

pg_status_t core_reduce_to(void*, void* out, const void* a, const void* b, uint64_t count,
                           pg_dtype_t dtype, pg_reduce_op_t op) {
  return reported(detail::reduce_to(out, a, b, count, dtype, op));
}

pg_status_t core_scale_down(void*, void* data, uint64_t count, pg_dtype_t dtype,
                            uint64_t divisor) {
  return reported(detail::scale_down(data, count, dtype, divisor));
}

}  // namespace

pg_host_services_t host_with_core_kernels(bool with_reduce_to) {
  pg_host_services_t host = plugin_harness::make_host(&core_reduce, &core_scale_down);
  if (with_reduce_to) {
    host.reduce_to = &core_reduce_to;
  } else {
    host.struct_size = offsetof(pg_host_services_t, reduce_to);  // an older core's table
  }
  return host;
}

const plugin_harness::PluginUnderTest& ucx_plugin() {
  static const pg_host_services_t host = host_with_core_kernels(true);
  static const plugin_harness::PluginUnderTest plugin = {PG_UCX_PATH, &host, "ucx", 100};
  return plugin;
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace procgroup::ucx_test
