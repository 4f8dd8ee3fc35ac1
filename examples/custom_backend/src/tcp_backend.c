/* tcp_backend.c — pg_backend_negotiate, the function table and the host helpers.
 *
 * This file is the whole contract with the core: negotiate picks interface version 1,
 * declares send and recv as the only native operations (the core then emulates every
 * collective over them, for every dtype and reduce op), and hands out a const table.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tcp_internal.h"

/* Written once by negotiate, before any group exists; the core keeps it valid for as long
 * as the plugin stays loaded. */
static const pg_host_services_t* g_host = NULL;

const pg_host_services_t* tcp_host(void) { return g_host; }

int64_t tcp_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The host's set_error and log are optional in a struct this old; check before calling. */
static int host_has(size_t offset_end) {
  return g_host != NULL && g_host->struct_size >= offset_end;
}

pg_status_t tcp_fail(pg_status_t status, const char* format, ...) {
  char message[TCP_MESSAGE_MAX];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof message, format, args);
  va_end(args);
  if (host_has(offsetof(pg_host_services_t, set_error) + sizeof(void*)) &&
      g_host->set_error != NULL) {
    g_host->set_error(g_host->ctx, message);
  }
  return status;
}

void tcp_log(int32_t level, const char* format, ...) {
  if (!host_has(offsetof(pg_host_services_t, log) + sizeof(void*)) || g_host->log == NULL) return;
  char message[TCP_MESSAGE_MAX];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof message, format, args);
  va_end(args);
  g_host->log(g_host->ctx, level, EXAMPLE_TCP_NAME, message);
}

/* ---- Works: the table's entries over tcp_work.c ---------------------------------- */

static pg_status_t work_test(pg_backend_work_t work) {
  if (work == NULL) return tcp_fail(PG_ERR_INVALID_ARGUMENT, EXAMPLE_TCP_NAME ": work is NULL");
  return tcp_work_test((tcp_work_t*)work);
}

static pg_status_t work_wait(pg_backend_work_t work, int64_t timeout_ms) {
  if (work == NULL) return tcp_fail(PG_ERR_INVALID_ARGUMENT, EXAMPLE_TCP_NAME ": work is NULL");
  return tcp_work_wait((tcp_work_t*)work, timeout_ms);
}

/* A pending work may be released: the op keeps its own reference and finishes alone. */
static void work_release(pg_backend_work_t work) {
  if (work != NULL) tcp_work_unref((tcp_work_t*)work);
}

/* Only send and recv: every collective entry is NULL, so the core runs its own
 * algorithms over them (DESIGN.md §3, docs/backend-interface.md). */
static const pg_backend_ops_t kOps = {
    .struct_size = sizeof(pg_backend_ops_t),
    .group_create = tcp_group_create,
    .group_destroy = tcp_group_destroy,
    .group_abort = tcp_group_abort,
    .work_test = work_test,
    .work_wait = work_wait,
    .work_release = work_release,
    .send = tcp_send,
    .recv = tcp_recv,
};

/* Fields of an out struct a core of any version >= 1 provides. */
#define OUT_V1_SIZE (offsetof(pg_backend_negotiate_out_t, ops) + sizeof(void*))
#define IN_V1_SIZE (offsetof(pg_backend_negotiate_in_t, host) + sizeof(void*))
#define HOST_V1_SIZE (offsetof(pg_host_services_t, set_error) + sizeof(void*))

PG_BACKEND_EXPORT pg_status_t pg_backend_negotiate(const pg_backend_negotiate_in_t* in,
                                                   pg_backend_negotiate_out_t* out) {
  if (in == NULL || in->struct_size < IN_V1_SIZE || in->host == NULL ||
      in->host->struct_size < HOST_V1_SIZE) {
    /* No usable host: nobody to tell why, so only the status says it. */
    return in == NULL ? PG_ERR_INVALID_ARGUMENT : PG_ERR_ABI_MISMATCH;
  }
  g_host = in->host;
  if (out == NULL) return tcp_fail(PG_ERR_INVALID_ARGUMENT, EXAMPLE_TCP_NAME ": out is NULL");
  if (in->min_version > 1 || in->max_version < 1) {
    return tcp_fail(PG_ERR_ABI_MISMATCH,
                    EXAMPLE_TCP_NAME
                    " speaks backend interface version 1 only; the core "
                    "offers %u..%u",
                    in->min_version, in->max_version);
  }
  if (out->struct_size < OUT_V1_SIZE) {
    return tcp_fail(PG_ERR_ABI_MISMATCH,
                    EXAMPLE_TCP_NAME
                    ": the core's output struct_size %u is smaller than "
                    "interface version 1's %zu",
                    out->struct_size, (size_t)OUT_V1_SIZE);
  }
  /* Field by field, never a struct assignment: a newer core's larger struct keeps its
   * tail (and its struct_size) as the core set them. */
  out->version = 1;
  out->name = EXAMPLE_TCP_NAME;
  out->description = "example plugin: send/recv over TCP, everything else from the core";
  out->native_ops = 1u << PG_OP_SEND | 1u << PG_OP_RECV;
  out->native_dtypes = ~0u; /* send/recv move bytes: any dtype */
  out->native_reduce_ops = 0;
  out->devices = 1u << PG_DEVICE_CPU;
  out->ops = &kOps;
  return PG_OK;
}
