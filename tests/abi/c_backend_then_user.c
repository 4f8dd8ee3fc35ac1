/* Both public headers in one C11 translation unit, procgroup_backend.h first: the shared
 * common-types block must be skipped cleanly the second time, in either order. Also pins the layout
 * (abi_layout.h) for the C compiler. */
#include <procgroup/procgroup_backend.h>
// (separate blocks, so that sorting includes cannot swap the order under test)
#include <procgroup/procgroup.h>

#include "abi_c_checks.h"
#include "abi_layout.h"

int abi_c_backend_then_user(void) {
  pg_buffer_t buffer = PG_BUFFER_INIT;
  pg_backend_op_t op;
  op.input = buffer;
  return op.input.struct_size == sizeof(pg_buffer_t) ? 0 : 1;
}
