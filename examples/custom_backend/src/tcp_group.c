/* tcp_group.c — a group's life (create, abort, destroy) and its failure. The send and recv
 * entries are in tcp_p2p.c, socket I/O in tcp_progress.c.
 *
 * Failure model: a timeout, a lost peer or group_abort fails the whole group. Every pending
 * op completes at once with the cause (the op that timed out with PG_ERR_TIMEOUT, the rest
 * with PG_ERR_ABORTED quoting it), later ops fail when issued, and the sockets are shut
 * down so that the peers' pending ops fail promptly too instead of waiting for their own
 * timeouts.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tcp_internal.h"

/* ---- Small helpers ------------------------------------------------------------- */

void tcp_wake(tcp_group_t* group) {
  const char byte = 1;
  /* A full pipe already guarantees a wake-up, so EAGAIN is fine to ignore. */
  ssize_t ignored = write(group->wake_write, &byte, 1);
  (void)ignored;
}

void tcp_queue_push(tcp_queue_t* queue, tcp_op_t* op) {
  op->next = NULL;
  if (queue->tail != NULL) {
    queue->tail->next = op;
  } else {
    queue->head = op;
  }
  queue->tail = op;
}

tcp_op_t* tcp_queue_pop(tcp_queue_t* queue) {
  tcp_op_t* op = queue->head;
  if (op == NULL) return NULL;
  queue->head = op->next;
  if (queue->head == NULL) queue->tail = NULL;
  op->next = NULL;
  return op;
}

tcp_op_t* tcp_queue_take_tag(tcp_queue_t* queue, uint64_t tag) {
  tcp_op_t* previous = NULL;
  for (tcp_op_t* op = queue->head; op != NULL; previous = op, op = op->next) {
    if (op->tag != tag) continue;
    if (previous != NULL) {
      previous->next = op->next;
    } else {
      queue->head = op->next;
    }
    if (queue->tail == op) queue->tail = previous;
    op->next = NULL;
    return op;
  }
  return NULL;
}

void tcp_describe_op(const tcp_op_t* op, char* out, size_t size) {
  snprintf(out, size, "%s of %llu bytes %s rank %d (tag %#llx)", op->is_send ? "send" : "recv",
           (unsigned long long)op->bytes, op->is_send ? "to" : "from", op->peer,
           (unsigned long long)op->tag);
}

void tcp_finish_op(tcp_op_t* op, pg_status_t status, const char* message) {
  tcp_work_complete(op->work, status, message);
  tcp_work_unref(op->work);
  free(op);
}

static void fail_queue(tcp_queue_t* queue, pg_status_t status, const char* message) {
  for (tcp_op_t* op; (op = tcp_queue_pop(queue)) != NULL;) tcp_finish_op(op, status, message);
}

void tcp_fail_group_locked(tcp_group_t* group, pg_status_t status, const char* format, ...) {
  if (group->failed) return;
  group->failed = 1;
  group->failure = status;
  va_list args;
  va_start(args, format);
  vsnprintf(group->failure_message, sizeof group->failure_message, format, args);
  va_end(args);
  tcp_log(status == PG_ERR_ABORTED ? PG_LOG_INFO : PG_LOG_WARN, "rank %d: %s", group->rank,
          group->failure_message);

  /* Pending ops share the cause's status: a lost peer is PG_ERR_PEER_LOST for everything
   * in flight, which is what the user has to act on. */
  char others[TCP_MESSAGE_MAX + 32];
  snprintf(others, sizeof others, EXAMPLE_TCP_NAME ": the group failed: %s",
           group->failure_message);
  for (int i = 0; i < group->size; ++i) {
    tcp_peer_t* peer = &group->peers[i];
    if (peer->in_recv != NULL) {
      tcp_finish_op(peer->in_recv, status, others);
      peer->in_recv = NULL;
      peer->in_discard = 1;
    }
    fail_queue(&peer->sends, status, others);
    fail_queue(&peer->recvs, status, others);
    /* Wakes the peers' progress threads with an EOF; the fd is closed by destroy. */
    if (peer->fd >= 0) shutdown(peer->fd, SHUT_RDWR);
  }
  tcp_wake(group);
}

/* ---- group_create / group_abort / group_destroy --------------------------------- */

static void group_free(tcp_group_t* group) {
  for (int i = 0; i < group->size; ++i) {
    tcp_peer_t* peer = &group->peers[i];
    if (peer->fd >= 0) close(peer->fd);
    for (tcp_msg_t* m = peer->unexpected_head; m != NULL;) {
      tcp_msg_t* next = m->next;
      free(m->data);
      free(m);
      m = next;
    }
    free(peer->in_buffer);
  }
  if (group->wake_read >= 0) close(group->wake_read);
  if (group->wake_write >= 0) close(group->wake_write);
  pthread_mutex_destroy(&group->mu);
  free(group->poll_fds);
  free(group->poll_peers);
  free(group->peers);
  free(group);
}

pg_status_t tcp_group_create(const pg_backend_group_config_t* config, pg_backend_group_t* out) {
  if (config == NULL || out == NULL) {
    return tcp_fail(PG_ERR_INVALID_ARGUMENT, EXAMPLE_TCP_NAME ": group_create: NULL argument");
  }
  *out = NULL;
  if (config->size < 1 || config->rank < 0 || config->rank >= config->size ||
      config->store == NULL) {
    return tcp_fail(PG_ERR_INVALID_ARGUMENT,
                    EXAMPLE_TCP_NAME ": group_create: rank %d of size %d%s", config->rank,
                    config->size, config->store == NULL ? " without a store" : "");
  }
  tcp_group_t* group = calloc(1, sizeof *group);
  tcp_peer_t* peers = calloc((size_t)config->size, sizeof *peers);
  struct pollfd* poll_fds = calloc((size_t)config->size, sizeof *poll_fds);
  int* poll_peers = calloc((size_t)config->size, sizeof *poll_peers);
  int wake[2] = {-1, -1};
  if (group == NULL || peers == NULL || poll_fds == NULL || poll_peers == NULL || pipe(wake) != 0) {
    free(group);
    free(peers);
    free(poll_fds);
    free(poll_peers);
    return tcp_fail(PG_ERR_OUT_OF_MEMORY, EXAMPLE_TCP_NAME ": group_create: out of resources");
  }
  pthread_mutex_init(&group->mu, NULL);
  group->rank = config->rank;
  group->size = config->size;
  group->timeout_ms = config->timeout_ms > 0 ? config->timeout_ms : 300000;
  group->peers = peers;
  group->poll_fds = poll_fds;
  group->poll_peers = poll_peers;
  for (int i = 0; i < config->size; ++i) peers[i].fd = -1;
  group->wake_read = wake[0];
  group->wake_write = wake[1];
  for (int i = 0; i < 2; ++i) {
    fcntl(wake[i], F_SETFL, O_NONBLOCK);
    fcntl(wake[i], F_SETFD, FD_CLOEXEC); /* a rank that spawns processes keeps them out */
  }

  pg_status_t status = tcp_connect_mesh(group, config); /* sets its own error */
  if (status == PG_OK) {
    if (pthread_create(&group->thread, NULL, tcp_progress_main, group) != 0) {
      status = tcp_fail(PG_ERR_BACKEND, EXAMPLE_TCP_NAME ": cannot start the progress thread");
    } else {
      group->thread_started = 1;
    }
  }
  if (status != PG_OK) {
    group_free(group);
    return status;
  }
  tcp_log(PG_LOG_DEBUG, "rank %d of %d: connected to every peer", group->rank, group->size);
  *out = group;
  return PG_OK;
}

pg_status_t tcp_group_abort(pg_backend_group_t group) {
  if (group == NULL) return tcp_fail(PG_ERR_INVALID_ARGUMENT, EXAMPLE_TCP_NAME ": group is NULL");
  pthread_mutex_lock(&group->mu);
  tcp_fail_group_locked(group, PG_ERR_ABORTED,
                        EXAMPLE_TCP_NAME ": the group was aborted by rank %d", group->rank);
  pthread_mutex_unlock(&group->mu);
  return PG_OK;
}

/* Lets the progress thread write what this rank still has queued (each send bounded by
 * its deadline), fails recvs nobody will match, then frees everything. */
pg_status_t tcp_group_destroy(pg_backend_group_t group) {
  if (group == NULL) return PG_OK;
  pthread_mutex_lock(&group->mu);
  group->closing = 1;
  const char* message = EXAMPLE_TCP_NAME ": the group was destroyed before the message came";
  for (int i = 0; i < group->size; ++i) {
    tcp_peer_t* peer = &group->peers[i];
    fail_queue(&peer->recvs, PG_ERR_ABORTED, message);
    if (peer->in_recv != NULL) {
      tcp_finish_op(peer->in_recv, PG_ERR_ABORTED, message);
      peer->in_recv = NULL;
      peer->in_discard = 1;
    }
  }
  tcp_wake(group);
  pthread_mutex_unlock(&group->mu);
  if (group->thread_started) pthread_join(group->thread, NULL);
  group_free(group);
  return PG_OK;
}
