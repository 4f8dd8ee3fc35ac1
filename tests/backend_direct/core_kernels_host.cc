// plugin_harness.h's host_with_core_kernels: the core's kernels, compiled in from
// pg_collectives, behind the host-service signatures a plugin calls.
#include <cstddef>

#include "collectives/reduce.h"
#include "direct_host.h"
#include "plugin_harness.h"

namespace procgroup::plugin_harness {
namespace {

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

pg_status_t core_scale_down(void*, void* data, uint64_t count, pg_dtype_t dtype, uint64_t divisor) {
  return reported(detail::scale_down(data, count, dtype, divisor));
}

}  // namespace

pg_host_services_t host_with_core_kernels(bool with_reduce_to) {
  pg_host_services_t host = make_host(&core_reduce, &core_scale_down);
  if (with_reduce_to) {
    host.reduce_to = &core_reduce_to;
  } else {
    host.struct_size = offsetof(pg_host_services_t, reduce_to);  // an older core's table
  }
  return host;
}

}  // namespace procgroup::plugin_harness
