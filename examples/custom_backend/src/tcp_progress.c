/* tcp_progress.c — the progress thread: all socket I/O of one group, with poll().
 *
 * Wire format, per connection: frames of a 16-byte header (tag, payload length; both
 * little-endian uint64) followed by the payload. TCP keeps each connection in order, and
 * each peer's sends are written strictly in issue order, so messages with the same
 * (peer, tag) arrive in the order they were sent. An arriving frame goes to the first
 * posted recv from that peer with its tag (its payload is read straight into the recv's
 * buffer), or into a buffer of its own until a recv asks for it. So a send never waits for
 * its recv, and no pattern of sends and recvs can deadlock on this plugin.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tcp_internal.h"

enum {
  kReadBudget = 4 << 20, /* bytes read from one peer before polling the others */
  kMaxPollMs = 1000,     /* poll at least this often, whatever the deadlines */
};
/* A frame longer than this is not from this plugin: the stream is corrupt. */
static const uint64_t kMaxFrame = (uint64_t)1 << 56;

void tcp_complete_recv(tcp_op_t* op, uint8_t* data, uint64_t bytes) {
  if (op->bytes != bytes) {
    char what[128], message[TCP_MESSAGE_MAX];
    tcp_describe_op(op, what, sizeof what);
    snprintf(message, sizeof message, EXAMPLE_TCP_NAME ": %s matched a message of %llu bytes", what,
             (unsigned long long)bytes);
    tcp_finish_op(op, PG_ERR_INVALID_ARGUMENT, message);
  } else {
    if (bytes != 0) memcpy(op->data, data, bytes);
    tcp_finish_op(op, PG_OK, NULL);
  }
  free(data);
}

int tcp_deliver_locked(tcp_group_t* group, int peer, uint64_t tag, uint8_t* data, uint64_t bytes) {
  tcp_op_t* op = tcp_queue_take_tag(&group->peers[peer].recvs, tag);
  if (op == NULL) return 0;
  tcp_complete_recv(op, data, bytes);
  return 1;
}

void tcp_push_unexpected(tcp_peer_t* peer, tcp_msg_t* msg) {
  msg->next = NULL;
  if (peer->unexpected_tail != NULL) {
    peer->unexpected_tail->next = msg;
  } else {
    peer->unexpected_head = msg;
  }
  peer->unexpected_tail = msg;
}

/* A peer closed its end or its socket broke. Harmless when nothing is in flight with it
 * (it destroyed the group first); otherwise the group has lost a peer. */
static void peer_gone(tcp_group_t* group, int index, int error) {
  tcp_peer_t* peer = &group->peers[index];
  const int busy = peer->in_header_got != 0 || peer->in_body || peer->sends.head != NULL ||
                   peer->recvs.head != NULL;
  /* The fd stays open until destroy, so its number cannot be reused under a poll(). */
  shutdown(peer->fd, SHUT_RDWR);
  peer->closed = 1;
  if (!busy || group->failed) return;
  tcp_fail_group_locked(group, PG_ERR_PEER_LOST,
                        EXAMPLE_TCP_NAME
                        ": rank %d lost its connection to rank %d (%s) with "
                        "messages in flight; that rank exited, aborted or destroyed the group",
                        group->rank, index, error != 0 ? strerror(error) : "closed by the peer");
}

/* Called when a frame's header is complete: decides where its payload goes. */
static int start_body(tcp_group_t* group, int index) {
  tcp_peer_t* peer = &group->peers[index];
  peer->in_tag = 0;
  peer->in_bytes = 0;
  for (int i = 7; i >= 0; --i) {
    peer->in_tag = peer->in_tag << 8 | peer->in_header[i];
    peer->in_bytes = peer->in_bytes << 8 | peer->in_header[8 + i];
  }
  if (peer->in_bytes > kMaxFrame) {
    tcp_fail_group_locked(group, PG_ERR_BACKEND,
                          EXAMPLE_TCP_NAME ": rank %d sent a corrupt frame (%llu bytes)", index,
                          (unsigned long long)peer->in_bytes);
    return -1;
  }
  peer->in_body = 1;
  peer->in_got = 0;
  tcp_op_t* op = tcp_queue_take_tag(&peer->recvs, peer->in_tag);
  if (op != NULL && op->bytes == peer->in_bytes) {
    peer->in_recv = op;
  } else if (op != NULL) {
    tcp_complete_recv(op, NULL, peer->in_bytes); /* fails it: the sizes differ */
    peer->in_discard = 1;
  } else if (peer->in_bytes != 0) {
    peer->in_buffer = malloc(peer->in_bytes);
    if (peer->in_buffer == NULL) {
      tcp_fail_group_locked(group, PG_ERR_OUT_OF_MEMORY,
                            EXAMPLE_TCP_NAME ": no memory to buffer %llu bytes from rank %d",
                            (unsigned long long)peer->in_bytes, index);
      return -1;
    }
  }
  return 0;
}

/* Called when a frame's payload is complete. */
static int finish_body(tcp_group_t* group, int index) {
  tcp_peer_t* peer = &group->peers[index];
  if (peer->in_recv != NULL) {
    tcp_finish_op(peer->in_recv, PG_OK, NULL);
  } else if (!peer->in_discard &&
             !tcp_deliver_locked(group, index, peer->in_tag, peer->in_buffer, peer->in_bytes)) {
    /* Still nobody asked (a recv posted meanwhile would have matched above). */
    tcp_msg_t* msg = malloc(sizeof *msg);
    if (msg == NULL) {
      free(peer->in_buffer);
      peer->in_buffer = NULL;
      tcp_fail_group_locked(group, PG_ERR_OUT_OF_MEMORY, EXAMPLE_TCP_NAME ": out of memory");
      return -1;
    }
    *msg = (tcp_msg_t){NULL, peer->in_tag, peer->in_bytes, peer->in_buffer};
    tcp_push_unexpected(peer, msg);
  }
  peer->in_recv = NULL;
  peer->in_buffer = NULL;
  peer->in_discard = 0;
  peer->in_body = 0;
  peer->in_header_got = 0;
  return 0;
}

/* Reads what the socket has (up to a budget); -1 when the peer is gone or the group failed. */
static int read_some(tcp_group_t* group, int index) {
  tcp_peer_t* peer = &group->peers[index];
  unsigned char discard[16384];
  size_t budget = kReadBudget;
  while (budget > 0 && !group->failed) {
    void* into;
    size_t want;
    if (!peer->in_body) {
      into = peer->in_header + peer->in_header_got;
      want = sizeof peer->in_header - peer->in_header_got;
    } else {
      const uint64_t left = peer->in_bytes - peer->in_got;
      want = left < budget ? (size_t)left : budget;
      if (peer->in_recv != NULL) {
        into = peer->in_recv->data + peer->in_got;
      } else if (peer->in_buffer != NULL) {
        into = peer->in_buffer + peer->in_got;
      } else {
        into = discard;
        if (want > sizeof discard) want = sizeof discard;
      }
    }
    ssize_t n = want == 0 ? 0 : recv(peer->fd, into, want, 0);
    if (want != 0 && n == 0) {
      peer_gone(group, index, 0);
      return -1;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      peer_gone(group, index, errno);
      return -1;
    }
    budget -= (size_t)n;
    if (!peer->in_body) {
      peer->in_header_got += (size_t)n;
      if (peer->in_header_got < sizeof peer->in_header) continue;
      if (start_body(group, index) != 0) return -1;
    } else {
      peer->in_got += (uint64_t)n;
    }
    if (peer->in_body && peer->in_got == peer->in_bytes && finish_body(group, index) != 0)
      return -1;
  }
  return 0;
}

int tcp_flush_sends_locked(tcp_group_t* group, int index) {
  tcp_peer_t* peer = &group->peers[index];
  for (tcp_op_t* op; (op = peer->sends.head) != NULL;) {
    const uint64_t total = sizeof op->header + op->bytes;
    struct iovec iov[2];
    int parts = 0;
    if (op->written < sizeof op->header) {
      iov[parts++] = (struct iovec){op->header + op->written, sizeof op->header - op->written};
      if (op->bytes != 0) iov[parts++] = (struct iovec){op->data, op->bytes};
    } else {
      const uint64_t offset = op->written - sizeof op->header;
      iov[parts++] = (struct iovec){op->data + offset, op->bytes - offset};
    }
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)parts};
    ssize_t n = sendmsg(peer->fd, &msg, MSG_NOSIGNAL); /* a closed peer is EPIPE, no signal */
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      peer_gone(group, index, errno);
      return -1;
    }
    op->written += (uint64_t)n;
    if (op->written < total) continue;
    tcp_queue_pop(&peer->sends);
    tcp_finish_op(op, PG_OK, NULL); /* in the kernel's hands: the buffer may be reused */
  }
  return 0;
}

static const tcp_op_t* earliest(const tcp_op_t* a, const tcp_op_t* b) {
  if (a == NULL) return b;
  if (b == NULL) return a;
  return b->deadline_ms < a->deadline_ms ? b : a;
}

/* The pending op whose deadline comes first (the heads of queues are the oldest, but a
 * later op may carry a shorter timeout, so every op counts). */
static const tcp_op_t* next_deadline(const tcp_group_t* group) {
  const tcp_op_t* first = NULL;
  for (int i = 0; i < group->size; ++i) {
    const tcp_peer_t* peer = &group->peers[i];
    first = earliest(first, peer->in_recv);
    for (const tcp_op_t* op = peer->sends.head; op != NULL; op = op->next)
      first = earliest(first, op);
    for (const tcp_op_t* op = peer->recvs.head; op != NULL; op = op->next)
      first = earliest(first, op);
  }
  return first;
}

static int sends_pending(const tcp_group_t* group) {
  for (int i = 0; i < group->size; ++i)
    if (group->peers[i].sends.head != NULL) return 1;
  return 0;
}

void* tcp_progress_main(void* arg) {
  tcp_group_t* group = arg;
  pthread_mutex_lock(&group->mu);
  for (;;) {
    if (group->closing && (group->failed || !sends_pending(group))) break;
    int count = 0;
    group->poll_fds[count++] = (struct pollfd){group->wake_read, POLLIN, 0};
    for (int i = 0; i < group->size && !group->failed; ++i) {
      tcp_peer_t* peer = &group->peers[i];
      if (peer->fd < 0 || peer->closed) continue;
      group->poll_peers[count] = i;
      group->poll_fds[count++] =
          (struct pollfd){peer->fd, (short)(POLLIN | (peer->sends.head ? POLLOUT : 0)), 0};
    }
    int timeout = kMaxPollMs;
    const tcp_op_t* due = group->failed ? NULL : next_deadline(group);
    if (due != NULL) {
      const int64_t left = due->deadline_ms - tcp_now_ms();
      if (left <= 0) {
        char what[128];
        tcp_describe_op(due, what, sizeof what);
        tcp_fail_group_locked(group, PG_ERR_TIMEOUT,
                              EXAMPLE_TCP_NAME ": rank %d: %s did not complete within %lld ms",
                              group->rank, what, (long long)due->timeout_ms);
        continue;
      }
      if (left < timeout) timeout = (int)left;
    }

    pthread_mutex_unlock(&group->mu);
    poll(group->poll_fds, (nfds_t)count, timeout);
    pthread_mutex_lock(&group->mu);

    if (group->poll_fds[0].revents != 0) {
      char drain[64];
      while (read(group->wake_read, drain, sizeof drain) > 0) {
      }
    }
    for (int k = 1; k < count && !group->failed; ++k) {
      const int i = group->poll_peers[k];
      const short events = group->poll_fds[k].revents;
      if (group->peers[i].closed || events == 0) continue;
      if ((events & (POLLIN | POLLHUP | POLLERR)) && read_some(group, i) != 0) continue;
      if ((events & POLLOUT) && !group->peers[i].closed) tcp_flush_sends_locked(group, i);
    }
  }
  /* Orderly end: the peers read our last bytes, then an EOF. */
  for (int i = 0; i < group->size; ++i)
    if (group->peers[i].fd >= 0 && !group->peers[i].closed) shutdown(group->peers[i].fd, SHUT_WR);
  pthread_mutex_unlock(&group->mu);
  return NULL;
}
