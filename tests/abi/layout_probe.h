/* layout_probe.h — one row of a layout table: a struct (size, alignment), a field
 * ("pg_buffer_t.count": offset, size) or a constant (value). layout_probe.c builds the
 * table twice, once against the frozen v1 headers and once against today's. */
#ifndef PROCGROUP_TESTS_ABI_LAYOUT_PROBE_H_
#define PROCGROUP_TESTS_ABI_LAYOUT_PROBE_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pg_layout_row {
  const char* name; /* NULL ends the table */
  uint64_t first;   /* struct: size; field: offset; constant: value */
  uint64_t second;  /* struct: alignment; field: size; constant: 0 */
} pg_layout_row_t;

extern const pg_layout_row_t pg_layout_frozen_v1[];
extern const pg_layout_row_t pg_layout_current[];

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PROCGROUP_TESTS_ABI_LAYOUT_PROBE_H_ */
