/* tcp_internal.h — the pieces of the example_tcp plugin shared between its files.
 *
 * example_tcp is a complete procgroup backend in plain C11 + POSIX that implements only
 * what a transport must: send and recv over its own TCP connections. The core builds every
 * collective on top of them. One group owns:
 *   - a full mesh of TCP connections, one per peer, set up in group_create through the
 *     host's rendezvous store (tcp_connect.c);
 *   - one progress thread that does all socket I/O with poll(): it writes each peer's send
 *     queue in issue order, reads framed messages, matches them to posted recvs by
 *     (peer, tag) in issue order, buffers the unexpected ones, and enforces deadlines
 *     (tcp_progress.c);
 *   - the send and recv entries, which complete what they can at once and queue the rest
 *     (tcp_p2p.c);
 *   - works that callers wait on, reference-counted so that a released or outliving work
 *     is always safe (tcp_work.c).
 * Everything in a group is guarded by its one mutex; the progress thread drops it only
 * while it sleeps in poll(), so no I/O races with abort, timeout or destroy.
 */
#ifndef EXAMPLE_TCP_INTERNAL_H_
#define EXAMPLE_TCP_INTERNAL_H_

/* POSIX.1-2008 (sockets, poll, pthreads, clock_gettime) on top of strict C11: the build
 * defines it for every file (CMakeLists.txt, Makefile), before any system header. */
#if !defined(_POSIX_C_SOURCE) || _POSIX_C_SOURCE < 200809L
#error "compile with -D_POSIX_C_SOURCE=200809L"
#endif

#include <poll.h>
#include <procgroup/procgroup_backend.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* The name the plugin negotiates; a build may override it (the ABI tests build these
 * sources against the frozen v1 header under another name). */
#ifndef EXAMPLE_TCP_NAME
#define EXAMPLE_TCP_NAME "example_tcp"
#endif

enum { TCP_MESSAGE_MAX = 320 };

/* ---- Host services (tcp_backend.c) -------------------------------------------- */

/* The host services negotiate was given; valid for as long as the plugin is loaded. */
const pg_host_services_t* tcp_host(void);
/* Sets the calling thread's error through the host and returns status. */
pg_status_t tcp_fail(pg_status_t status, const char* format, ...)
    __attribute__((format(printf, 2, 3)));
void tcp_log(int32_t level, const char* format, ...) __attribute__((format(printf, 2, 3)));
int64_t tcp_now_ms(void);

/* ---- Works (tcp_work.c) -------------------------------------------------------- */

typedef struct tcp_work {
  atomic_int refs;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* signalled once, when done becomes 1 */
  int done;
  pg_status_t status;
  char message[TCP_MESSAGE_MAX];
} tcp_work_t;

/* A pending work with two references: the caller's handle and the operation's. */
tcp_work_t* tcp_work_new(void);
void tcp_work_unref(tcp_work_t* work);
/* The first completion wins; later ones are ignored. message may be NULL for PG_OK. */
void tcp_work_complete(tcp_work_t* work, pg_status_t status, const char* message);
pg_status_t tcp_work_test(tcp_work_t* work);
pg_status_t tcp_work_wait(tcp_work_t* work, int64_t timeout_ms);

/* ---- Groups -------------------------------------------------------------------- */

/* A send or a posted recv. The op holds one reference to its work. */
typedef struct tcp_op {
  struct tcp_op* next;
  tcp_work_t* work;
  int is_send;
  int peer;
  uint64_t tag;
  uint8_t* data;       /* send: read from; recv: written to (the caller's buffer) */
  uint64_t bytes;      /* payload size */
  uint64_t written;    /* send: bytes of header + payload written so far */
  int64_t deadline_ms; /* tcp_now_ms() clock */
  int64_t timeout_ms;  /* for messages */
  unsigned char header[16];
} tcp_op_t;

/* A message that arrived before its recv was posted. */
typedef struct tcp_msg {
  struct tcp_msg* next;
  uint64_t tag;
  uint64_t bytes;
  uint8_t* data; /* malloc'd; NULL when bytes == 0 */
} tcp_msg_t;

typedef struct tcp_queue {
  tcp_op_t* head;
  tcp_op_t* tail;
} tcp_queue_t;

typedef struct tcp_peer {
  int fd;     /* -1 for this rank itself and once closed */
  int closed; /* the peer closed its end (destroy, abort or exit) */
  tcp_queue_t sends;
  tcp_queue_t recvs; /* posted recvs from this peer, in issue order */
  tcp_msg_t* unexpected_head;
  tcp_msg_t* unexpected_tail;
  /* The incoming frame being read. */
  unsigned char in_header[16];
  size_t in_header_got;
  int in_body; /* the header is complete, the payload is being read */
  uint64_t in_tag, in_bytes, in_got;
  tcp_op_t* in_recv;  /* the matched recv whose buffer receives the payload */
  uint8_t* in_buffer; /* else: an unexpected message's buffer */
  int in_discard;     /* else: payload nobody will see (a recv of another size) */
} tcp_peer_t;

struct pg_backend_group_s {
  pthread_mutex_t mu;
  int rank;
  int size;
  int64_t timeout_ms;
  tcp_peer_t* peers;         /* size entries; peers[rank] holds messages to self */
  int wake_read, wake_write; /* a pipe that wakes the progress thread */
  struct pollfd* poll_fds;   /* size entries, the progress thread's */
  int* poll_peers;           /* the peer of each poll_fds entry after the first */
  pthread_t thread;
  int thread_started;
  int closing; /* group_destroy has begun */
  int failed;  /* aborted, timed out or lost a peer: every op now fails */
  pg_status_t failure;
  char failure_message[TCP_MESSAGE_MAX];
};
typedef struct pg_backend_group_s tcp_group_t;

/* tcp_connect.c: listens, publishes its endpoint in the store, connects the full mesh. On
 * success every peers[i].fd (i != rank) is a connected non-blocking socket. */
pg_status_t tcp_connect_mesh(tcp_group_t* group, const pg_backend_group_config_t* config);

/* tcp_progress.c */
void* tcp_progress_main(void* group);
/* Tries to write the peer's queued sends now (caller holds mu); 0 or -1 on a broken peer,
 * in which case the group has been failed. */
int tcp_flush_sends_locked(tcp_group_t* group, int peer);
/* Matches a complete message from peer to the first posted recv with its tag: returns 1
 * and completes that recv (taking ownership of data, which it frees), or 0. */
int tcp_deliver_locked(tcp_group_t* group, int peer, uint64_t tag, uint8_t* data, uint64_t bytes);
/* Appends a message nobody has asked for yet to the peer's list, in arrival order. */
void tcp_push_unexpected(tcp_peer_t* peer, tcp_msg_t* msg);
/* Completes recv op with a whole message (copied, then data is freed): PG_OK, or
 * PG_ERR_INVALID_ARGUMENT when the sizes differ. Frees op. */
void tcp_complete_recv(tcp_op_t* op, uint8_t* data, uint64_t bytes);

/* tcp_group.c */
void tcp_wake(tcp_group_t* group);
/* Fails the group (first cause wins): every pending op completes with an error, sockets
 * are shut down so that peers learn at once. Caller holds mu. */
void tcp_fail_group_locked(tcp_group_t* group, pg_status_t status, const char* format, ...)
    __attribute__((format(printf, 3, 4)));
/* Completes op with status and frees it (dropping its work reference). */
void tcp_finish_op(tcp_op_t* op, pg_status_t status, const char* message);
void tcp_queue_push(tcp_queue_t* queue, tcp_op_t* op);
tcp_op_t* tcp_queue_pop(tcp_queue_t* queue);
/* Removes and returns the first op with this tag, or NULL. */
tcp_op_t* tcp_queue_take_tag(tcp_queue_t* queue, uint64_t tag);
void tcp_describe_op(const tcp_op_t* op, char* out, size_t size);

pg_status_t tcp_group_create(const pg_backend_group_config_t* config, pg_backend_group_t* out);
pg_status_t tcp_group_destroy(pg_backend_group_t group);
pg_status_t tcp_group_abort(pg_backend_group_t group);

/* tcp_p2p.c */
pg_status_t tcp_send(pg_backend_group_t group, const pg_backend_op_t* op, pg_backend_work_t* work);
pg_status_t tcp_recv(pg_backend_group_t group, const pg_backend_op_t* op, pg_backend_work_t* work);

#endif /* EXAMPLE_TCP_INTERNAL_H_ */
