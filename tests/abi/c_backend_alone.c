/* procgroup_backend.h alone, as C11 with -Wall -Wextra -Werror -pedantic: what a plugin
 * author who copied the header writes. */
#include <procgroup/procgroup_backend.h>
#include <stdio.h>
#include <string.h>

#include "abi_c_checks.h"

#define CHECK(cond)                                                      \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                        \
    }                                                                    \
  } while (0)

static pg_status_t c_send(pg_backend_group_t group, const pg_backend_op_t* op,
                          pg_backend_work_t* work) {
  (void)group;
  (void)op;
  (void)work;
  return PG_ERR_UNSUPPORTED;
}

int abi_c_backend_alone(void) {
  int failures = 0;
  /* A table initialised positionally, as the header's own example does. */
  const pg_backend_ops_t ops = {sizeof(pg_backend_ops_t),
                                0,
                                NULL,
                                NULL,
                                NULL,
                                NULL,
                                NULL,
                                NULL,
                                NULL,
                                NULL,
                                NULL,
                                NULL,
                                NULL,
                                NULL,
                                NULL,
                                NULL,
                                NULL,
                                c_send,
                                c_send,
                                NULL,
                                NULL};
  pg_backend_negotiate_fn negotiate = NULL;
  CHECK(ops.struct_size >= PG_BACKEND_OPS_V1_SIZE);
  CHECK(ops.struct_size >= PG_BACKEND_OPS_SPLIT_SIZE && ops.group_split == NULL);
  CHECK(ops.struct_size >= PG_BACKEND_OPS_ON_COMPLETE_SIZE && ops.work_on_complete == NULL);
  CHECK(ops.send == c_send && ops.recv == c_send);
  CHECK(PG_SPLIT_NO_COLOR == -1);
  CHECK(negotiate == NULL);
  CHECK(strcmp(PG_BACKEND_NEGOTIATE_SYMBOL, "pg_backend_negotiate") == 0);
  CHECK(PG_BACKEND_RESERVED_TAG_BASE == ((uint64_t)1 << 62));
  CHECK(PG_BACKEND_INTERFACE_VERSION == 1u);
  return failures;
}
