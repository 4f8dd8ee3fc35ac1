// procgroup_backend.h alone as C++ (built as C++11 with -Werror): a C++ plugin's view.
#include <procgroup/procgroup_backend.h>

int abi_cxx_backend_alone() {
  pg_backend_negotiate_out_t out = {};
  out.struct_size = sizeof(out);
  return out.struct_size >= offsetof(pg_backend_negotiate_out_t, ops) ? 0 : 1;
}
