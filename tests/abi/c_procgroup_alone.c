/* procgroup.h alone, as C11 with -Wall -Wextra -Werror -pedantic: what a C user writes. */
#include <procgroup/procgroup.h>
#include <stdio.h>

#include "abi_c_checks.h"

#define CHECK(cond)                                                      \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                        \
    }                                                                    \
  } while (0)

int abi_c_procgroup_alone(void) {
  int failures = 0;
  float data[3] = {1.0f, 2.0f, 3.0f};
  pg_buffer_t buffer = pg_buffer_cpu(data, 3, PG_DTYPE_F32);
  pg_group_options_t group_options = PG_GROUP_OPTIONS_INIT;
  pg_op_options_t op_options = PG_OP_OPTIONS_INIT;
  pg_capabilities_t capabilities = PG_CAPABILITIES_INIT;
  pg_buffer_t empty = PG_BUFFER_INIT;
  CHECK(buffer.struct_size == sizeof(pg_buffer_t));
  CHECK(buffer.data == data && buffer.count == 3 && buffer.dtype == PG_DTYPE_F32);
  CHECK(buffer.device_type == PG_DEVICE_CPU && buffer.stream == NULL);
  CHECK(empty.dtype == PG_DTYPE_INVALID && empty.data == NULL);
  CHECK(group_options.struct_size == sizeof(pg_group_options_t) && group_options.size == 0);
  CHECK(group_options.backend == NULL && group_options.name == NULL);
  CHECK(op_options.struct_size == sizeof(pg_op_options_t) && op_options.reduce_op == PG_REDUCE_SUM);
  CHECK(capabilities.struct_size == sizeof(pg_capabilities_t));
  CHECK(PG_ABI_VERSION == 0x10001u);  /* 1.1 */
  return failures;
}
