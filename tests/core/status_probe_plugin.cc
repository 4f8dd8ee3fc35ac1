// The status probe plugin: a one-rank backend whose group_create and work_test/work_wait
// return whatever status the test puts in PGTEST_PROBE_CREATE_STATUS and
// PGTEST_PROBE_WAIT_STATUS (unset: PG_OK), including ones no plugin may return (PG_PENDING
// from group_create, 12345, 777), to check what the core makes of them.
#include <cstdlib>
#include <string>

#include "procgroup/procgroup_backend.h"

namespace {

const pg_host_services_t* g_host = nullptr;
int g_aborts = 0;  // group_abort calls, for pgtest_status_probe_aborts
int g_group = 0;   // the one group's handle points here
int g_work = 0;    // and every work's here

pg_status_t status_from(const char* variable) {
  const char* text = std::getenv(variable);
  return text == nullptr ? PG_OK : static_cast<pg_status_t>(std::atoi(text));
}

pg_status_t probe_create(const pg_backend_group_config_t*, pg_backend_group_t* out) {
  const pg_status_t status = status_from("PGTEST_PROBE_CREATE_STATUS");
  if (status != PG_OK) g_host->set_error(g_host->ctx, "status probe: as told, from group_create");
  *out = reinterpret_cast<pg_backend_group_t>(&g_group);
  return status;
}
pg_status_t probe_destroy(pg_backend_group_t) { return PG_OK; }
pg_status_t probe_abort(pg_backend_group_t) {
  ++g_aborts;
  return PG_OK;
}
pg_status_t probe_wait(pg_backend_work_t, int64_t) {
  return status_from("PGTEST_PROBE_WAIT_STATUS");
}
pg_status_t probe_test(pg_backend_work_t work) { return probe_wait(work, 0); }
void probe_release(pg_backend_work_t) {}
pg_status_t probe_op(pg_backend_group_t, const pg_backend_op_t*, pg_backend_work_t* out) {
  *out = reinterpret_cast<pg_backend_work_t>(&g_work);
  return PG_OK;
}

pg_backend_ops_t make_table() {
  pg_backend_ops_t t{};
  t.struct_size = sizeof(t);
  t.group_create = probe_create;
  t.group_destroy = probe_destroy;
  t.group_abort = probe_abort;
  t.work_test = probe_test;
  t.work_wait = probe_wait;
  t.work_release = probe_release;
  t.allreduce = probe_op;
  t.send = probe_op;  // the loader wants send/recv; the tests never call them
  t.recv = probe_op;
  return t;
}
const pg_backend_ops_t g_table = make_table();

}  // namespace

extern "C" PG_BACKEND_EXPORT int pgtest_status_probe_aborts() { return g_aborts; }

extern "C" PG_BACKEND_EXPORT pg_status_t pg_backend_negotiate(const pg_backend_negotiate_in_t* in,
                                                              pg_backend_negotiate_out_t* out) {
  if (in == nullptr || out == nullptr || in->host == nullptr) return PG_ERR_INVALID_ARGUMENT;
  if (in->min_version > 1 || in->max_version < 1) return PG_ERR_ABI_MISMATCH;
  g_host = in->host;
  out->version = 1;
  out->name = "status_probe";
  out->description = "returns the statuses a test asks for";
  out->native_ops = 1u << PG_OP_ALLREDUCE | 1u << PG_OP_SEND | 1u << PG_OP_RECV;
  out->native_dtypes = ~0u;
  out->native_reduce_ops = ~0u;
  out->devices = 1u << PG_DEVICE_CPU;
  out->ops = &g_table;
  return PG_OK;
}
