/* Expands v1_surface.h against whichever procgroup headers are first on the include path
 * into the table PG_LAYOUT_TABLE (tests/abi/CMakeLists.txt compiles this file twice). */
#include "layout_probe.h"

#include <procgroup/procgroup.h>
#include <procgroup/procgroup_backend.h>
#include <stdalign.h>

#include "v1_surface.h"

#ifndef PG_LAYOUT_TABLE
#error "define PG_LAYOUT_TABLE to pg_layout_frozen_v1 or pg_layout_current"
#endif

#define PG_ROW_STRUCT(s) {#s, sizeof(s), alignof(s)},
#define PG_ROW_FIELD(s, f) {#s "." #f, offsetof(s, f), sizeof(((s*)0)->f)},
#define PG_ROW_CONSTANT(c) {#c, (uint64_t)(c), 0},

const pg_layout_row_t PG_LAYOUT_TABLE[] = {PG_V1_STRUCTS(PG_ROW_STRUCT)      //
                                           PG_V1_FIELDS(PG_ROW_FIELD)        //
                                           PG_V1_CONSTANTS(PG_ROW_CONSTANT)  //
                                           {0, 0, 0}};
