/* tcp_p2p.c — the send and recv entries: validate, turn the request into an op, and
 * either complete it at once (a recv whose message already arrived, a send to self) or
 * queue it for the progress thread. A send to a peer is written right away when nothing
 * is queued before it, which saves a thread hand-off for small messages.
 */
#include <stdlib.h>
#include <string.h>

#include "tcp_internal.h"

/* About 36 years: keeps now + timeout far from overflowing. */
static const int64_t kMaxTimeoutMs = (int64_t)1 << 40;

static uint64_t dtype_size(int32_t dtype) {
  switch (dtype) {
    case PG_DTYPE_F64:
    case PG_DTYPE_I64: return 8;
    case PG_DTYPE_F32:
    case PG_DTYPE_I32: return 4;
    case PG_DTYPE_F16:
    case PG_DTYPE_BF16: return 2;
    case PG_DTYPE_I8:
    case PG_DTYPE_U8: return 1;
    default: return 0;
  }
}

/* Validates one send or recv and turns it into an op (not yet queued). */
static pg_status_t make_op(tcp_group_t* group, const pg_backend_op_t* request, int is_send,
                           tcp_op_t** out) {
  const char* what = is_send ? "send" : "recv";
  if (request == NULL || request->struct_size < sizeof(pg_backend_op_t)) {
    return tcp_fail(PG_ERR_INVALID_ARGUMENT, EXAMPLE_TCP_NAME ": %s: bad op struct", what);
  }
  /* A send reads input and a recv writes output; a lone buffer in the other field is
   * taken too. */
  const pg_buffer_t* buffer = is_send ? &request->input : &request->output;
  const pg_buffer_t* other = is_send ? &request->output : &request->input;
  if (buffer->data == NULL && buffer->count == 0 && (other->data != NULL || other->count != 0))
    buffer = other;
  if (request->peer < 0 || request->peer >= group->size) {
    return tcp_fail(PG_ERR_INVALID_ARGUMENT, EXAMPLE_TCP_NAME ": %s: peer %d of a group of %d",
                    what, request->peer, group->size);
  }
  uint64_t bytes = 0;
  if (buffer->count != 0) {
    const uint64_t element = dtype_size(buffer->dtype);
    if (element == 0 || buffer->data == NULL || buffer->count > UINT64_MAX / element) {
      return tcp_fail(PG_ERR_INVALID_ARGUMENT,
                      EXAMPLE_TCP_NAME ": %s: buffer of %llu elements of dtype %d at %p", what,
                      (unsigned long long)buffer->count, buffer->dtype, buffer->data);
    }
    if (buffer->device_type != PG_DEVICE_CPU) {
      return tcp_fail(PG_ERR_UNSUPPORTED, EXAMPLE_TCP_NAME ": %s: CPU buffers only", what);
    }
    bytes = buffer->count * element;
  }
  tcp_op_t* op = calloc(1, sizeof *op);
  tcp_work_t* work = op != NULL ? tcp_work_new() : NULL;
  if (work == NULL) {
    free(op);
    return tcp_fail(PG_ERR_OUT_OF_MEMORY, EXAMPLE_TCP_NAME ": %s: out of memory", what);
  }
  op->work = work;
  op->is_send = is_send;
  op->peer = request->peer;
  op->tag = request->tag;
  op->data = buffer->data;
  op->bytes = bytes;
  op->timeout_ms = request->timeout_ms > 0 ? request->timeout_ms : group->timeout_ms;
  if (op->timeout_ms > kMaxTimeoutMs) op->timeout_ms = kMaxTimeoutMs; /* "no limit" stays finite */
  op->deadline_ms = tcp_now_ms() + op->timeout_ms;
  /* The frame header: tag and payload length, little-endian on the wire. */
  for (int i = 0; i < 8; ++i) {
    op->header[i] = (unsigned char)(op->tag >> (8 * i));
    op->header[8 + i] = (unsigned char)(bytes >> (8 * i));
  }
  *out = op;
  return PG_OK;
}

/* Refuses an op on a failed group or a closed peer, with the reason. Caller holds mu. */
static pg_status_t check_usable_locked(tcp_group_t* group, const tcp_op_t* op) {
  char what[128];
  tcp_describe_op(op, what, sizeof what);
  if (group->closing) {
    return tcp_fail(PG_ERR_INVALID_ARGUMENT, EXAMPLE_TCP_NAME ": %s after group_destroy", what);
  }
  if (group->failed) {
    /* Later ops report the group as aborted, quoting the cause. */
    return tcp_fail(PG_ERR_ABORTED, EXAMPLE_TCP_NAME ": %s: the group failed earlier: %s", what,
                    group->failure_message);
  }
  return PG_OK;
}

/* An op that needs a connection the peer has closed. A recv checks the messages that
 * arrived before the close first: a peer that sent its last message and then destroyed
 * the group has done nothing wrong. */
static pg_status_t peer_closed_locked(tcp_group_t* group, const tcp_op_t* op) {
  char what[128];
  tcp_describe_op(op, what, sizeof what);
  tcp_fail_group_locked(group, PG_ERR_PEER_LOST,
                        EXAMPLE_TCP_NAME
                        ": %s: rank %d has closed its connection (it "
                        "destroyed the group, aborted or exited)",
                        what, op->peer);
  return tcp_fail(PG_ERR_PEER_LOST, "%s", group->failure_message);
}

static int has_unexpected(const tcp_peer_t* peer, uint64_t tag) {
  for (const tcp_msg_t* msg = peer->unexpected_head; msg != NULL; msg = msg->next)
    if (msg->tag == tag) return 1;
  return 0;
}

/* Removes and returns the earliest message with this tag that arrived unasked, or NULL. */
static tcp_msg_t* take_unexpected(tcp_peer_t* peer, uint64_t tag) {
  tcp_msg_t* previous = NULL;
  tcp_msg_t* msg = peer->unexpected_head;
  while (msg != NULL && msg->tag != tag) previous = msg, msg = msg->next;
  if (msg == NULL) return NULL;
  if (previous != NULL) {
    previous->next = msg->next;
  } else {
    peer->unexpected_head = msg->next;
  }
  if (peer->unexpected_tail == msg) peer->unexpected_tail = previous;
  msg->next = NULL;
  return msg;
}

static pg_status_t submit(tcp_group_t* group, const pg_backend_op_t* request, int is_send,
                          pg_backend_work_t* work_out) {
  if (group == NULL || work_out == NULL) {
    return tcp_fail(PG_ERR_INVALID_ARGUMENT, EXAMPLE_TCP_NAME ": NULL group or work");
  }
  tcp_op_t* op = NULL;
  pg_status_t status = make_op(group, request, is_send, &op);
  if (status != PG_OK) return status;
  tcp_work_t* work = op->work;

  pthread_mutex_lock(&group->mu);
  status = check_usable_locked(group, op);
  tcp_peer_t* peer = &group->peers[op->peer];
  if (status == PG_OK && peer->closed && (is_send || !has_unexpected(peer, op->tag))) {
    status = peer_closed_locked(group, op);
  }
  if (status != PG_OK) {
    pthread_mutex_unlock(&group->mu);
    tcp_work_unref(work);
    tcp_work_unref(work);
    free(op);
    return status;
  }
  if (!is_send) {
    /* An unexpected message with this tag that arrived earlier is this recv's. */
    tcp_msg_t* msg = take_unexpected(peer, op->tag);
    if (msg != NULL) {
      tcp_complete_recv(op, msg->data, msg->bytes);
      free(msg);
    } else {
      tcp_queue_push(&peer->recvs, op);
      tcp_wake(group); /* its deadline now counts */
    }
  } else if (op->peer == group->rank) {
    /* To self: a copy taken now, so a send never waits for its recv. */
    uint8_t* copy = op->bytes != 0 ? malloc(op->bytes) : NULL;
    if (op->bytes != 0 && copy == NULL) {
      tcp_finish_op(op, PG_ERR_OUT_OF_MEMORY, EXAMPLE_TCP_NAME ": send to self: out of memory");
    } else {
      if (op->bytes != 0) memcpy(copy, op->data, op->bytes);
      if (!tcp_deliver_locked(group, op->peer, op->tag, copy, op->bytes)) {
        tcp_msg_t* msg = malloc(sizeof *msg);
        if (msg == NULL) {
          free(copy);
          tcp_finish_op(op, PG_ERR_OUT_OF_MEMORY, EXAMPLE_TCP_NAME ": send to self: no memory");
          op = NULL;
        } else {
          *msg = (tcp_msg_t){NULL, op->tag, op->bytes, copy};
          tcp_push_unexpected(peer, msg);
        }
      }
      if (op != NULL) tcp_finish_op(op, PG_OK, NULL);
    }
  } else {
    /* Written right away when the queue is empty; the progress thread does the rest. */
    const int was_idle = peer->sends.head == NULL;
    tcp_queue_push(&peer->sends, op);
    if (was_idle) tcp_flush_sends_locked(group, op->peer);
    if (peer->sends.head != NULL) tcp_wake(group);
  }
  pthread_mutex_unlock(&group->mu);
  *work_out = (pg_backend_work_t)work;
  return PG_OK;
}

pg_status_t tcp_send(pg_backend_group_t group, const pg_backend_op_t* op, pg_backend_work_t* work) {
  return submit(group, op, 1, work);
}

pg_status_t tcp_recv(pg_backend_group_t group, const pg_backend_op_t* op, pg_backend_work_t* work) {
  return submit(group, op, 0, work);
}
