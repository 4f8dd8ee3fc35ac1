// Both headers as C++11, backend header first (abi_layout_test.cc includes the other order).
#include <procgroup/procgroup_backend.h>
// (separate blocks, so that sorting includes cannot swap the order under test)
#include <procgroup/procgroup.h>

int abi_cxx_backend_then_user() {
  pg_capabilities_t caps = PG_CAPABILITIES_INIT;
  return caps.struct_size == sizeof(caps) ? 0 : 1;
}
