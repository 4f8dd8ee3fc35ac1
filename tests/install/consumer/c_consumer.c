/* A C program built with pkg-config alone (procgroup.pc): the user header as C11 and
 * libprocgroup.so of the same ABI major. */
#include <procgroup/procgroup.h>
#include <stdio.h>

int main(void) {
  uint32_t major = 0, minor = 0;
  if (pg_get_version(&major, &minor) != PG_OK || major != PG_ABI_VERSION_MAJOR) {
    fprintf(stderr, "c consumer: library ABI %u.%u, header %d.%d\n", major, minor,
            PG_ABI_VERSION_MAJOR, PG_ABI_VERSION_MINOR);
    return 1;
  }
  pg_group_options_t options = PG_GROUP_OPTIONS_INIT;
  options.size = 1;
  options.backend = "loopback";
  pg_group_t group;
  if (pg_group_create(&options, &group) != PG_OK) {
    fprintf(stderr, "c consumer: %s\n", pg_last_error());
    return 1;
  }
  double x[2] = {1.5, 2.5};
  pg_buffer_t buffer = pg_buffer_cpu(x, 2, PG_DTYPE_F64);
  pg_status_t status = pg_allreduce(group, NULL, &buffer, NULL, NULL);
  pg_group_destroy(group);
  printf("c consumer: ABI %u.%u, allreduce %s\n", major, minor,
         status == PG_OK && x[1] == 2.5 ? "ok" : "WRONG");
  return status == PG_OK && x[1] == 2.5 ? 0 : 1;
}
