/* Both public headers in one C11 translation unit, procgroup.h first: the shared common-types
 * block must be skipped cleanly the second time, in either order. Also pins the layout
 * (abi_layout.h) for the C compiler. */
#include <procgroup/procgroup.h>
// (separate blocks, so that sorting includes cannot swap the order under test)
#include <procgroup/procgroup_backend.h>

#include "abi_c_checks.h"
#include "abi_layout.h"

int abi_c_user_then_backend(void) {
  pg_buffer_t buffer = PG_BUFFER_INIT;
  pg_backend_op_t op;
  op.input = buffer;
  return op.input.struct_size == sizeof(pg_buffer_t) ? 0 : 1;
}

const abi_c_size_t* abi_c_sizes(size_t* count) {
  static const abi_c_size_t sizes[] = {
      {"pg_buffer_t", sizeof(pg_buffer_t)},
      {"pg_group_options_t", sizeof(pg_group_options_t)},
      {"pg_op_options_t", sizeof(pg_op_options_t)},
      {"pg_capabilities_t", sizeof(pg_capabilities_t)},
      {"pg_host_services_t", sizeof(pg_host_services_t)},
      {"pg_host_store_t", sizeof(pg_host_store_t)},
      {"pg_backend_group_config_t", sizeof(pg_backend_group_config_t)},
      {"pg_backend_op_t", sizeof(pg_backend_op_t)},
      {"pg_backend_ops_t", sizeof(pg_backend_ops_t)},
      {"pg_backend_negotiate_in_t", sizeof(pg_backend_negotiate_in_t)},
      {"pg_backend_negotiate_out_t", sizeof(pg_backend_negotiate_out_t)},
  };
  *count = sizeof(sizes) / sizeof(sizes[0]);
  return sizes;
}
