// procgroup.h alone as C++ (built as C++11 with -Werror, the oldest a user might have).
#include <procgroup/procgroup.h>

int abi_cxx_procgroup_alone() {
  pg_buffer_t buffer = PG_BUFFER_INIT;
  pg_group_options_t options = PG_GROUP_OPTIONS_INIT;
  return buffer.struct_size == sizeof(buffer) && options.struct_size == sizeof(options) ? 0 : 1;
}
