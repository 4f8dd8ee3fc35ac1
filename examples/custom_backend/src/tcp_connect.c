/* tcp_connect.c — group_create's rendezvous: a full mesh of TCP connections.
 *
 * Every rank listens on an ephemeral port of the interface that routes to MASTER_ADDR
 * (127.0.0.1 when that is a loopback address) and publishes "address port cookie" under
 * the store key example_tcp/endpoint/<rank>. The store is already private to the group, so
 * the keys need no group id. Rank r then connects to every lower rank and accepts every
 * higher one; each connection opens with a hello (magic, protocol, rank, size, the
 * listener's cookie) answered by an ack, so a stray or stale client is turned away. Rank 0
 * only accepts and rank size-1 only connects, so nobody waits in a cycle. Everything is
 * bounded by the group timeout, and a failure names the ranks not heard from.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tcp_internal.h"

enum { kHelloSize = 24, kAckSize = 12, kMaxHelloMs = 10000 };
static const uint32_t kMagic = 0x50475443u; /* "PGTC" */
static const uint32_t kProtocol = 1;

static int64_t remaining_ms(int64_t deadline) {
  const int64_t left = deadline - tcp_now_ms();
  return left > 0 ? left : 0;
}

static int prepare_fd(int fd) {
  return fcntl(fd, F_SETFD, FD_CLOEXEC) == 0 && fcntl(fd, F_SETFL, O_NONBLOCK) == 0 ? 0 : -1;
}

static void put_u32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | p[i];
  return v;
}
static uint64_t get_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

/* The local IPv4 address that routes to master_addr: connecting a UDP socket sends
 * nothing but makes the kernel pick the source address. */
static pg_status_t local_address(const char* master_addr, struct in_addr* out) {
  out->s_addr = htonl(INADDR_LOOPBACK);
  if (master_addr == NULL || master_addr[0] == '\0') return PG_OK;
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM};
  struct addrinfo* found = NULL;
  int rc = getaddrinfo(master_addr, "9", &hints, &found);
  if (rc != 0) {
    return tcp_fail(PG_ERR_CONFIG, EXAMPLE_TCP_NAME ": cannot resolve master address '%s': %s",
                    master_addr, gai_strerror(rc));
  }
  const struct sockaddr_in target = *(const struct sockaddr_in*)found->ai_addr;
  freeaddrinfo(found);
  if ((ntohl(target.sin_addr.s_addr) >> 24) == 127) return PG_OK; /* one host: loopback */
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in self;
  socklen_t length = sizeof self;
  const int ok = fd >= 0 && connect(fd, (const struct sockaddr*)&target, sizeof target) == 0 &&
                 getsockname(fd, (struct sockaddr*)&self, &length) == 0;
  const int error = errno;
  if (fd >= 0) close(fd);
  if (!ok) {
    return tcp_fail(PG_ERR_CONFIG, EXAMPLE_TCP_NAME ": no local interface routes to '%s': %s",
                    master_addr, strerror(error));
  }
  *out = self.sin_addr;
  return PG_OK;
}

/* Waits until fd is ready for events, or the deadline. */
static pg_status_t wait_fd(int fd, short events, int64_t deadline, const char* what) {
  for (;;) {
    struct pollfd p = {fd, events, 0};
    const int n = poll(&p, 1, (int)remaining_ms(deadline));
    if (n > 0) return PG_OK;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return tcp_fail(PG_ERR_BACKEND, EXAMPLE_TCP_NAME ": poll: %s", strerror(errno));
    return tcp_fail(PG_ERR_TIMEOUT, EXAMPLE_TCP_NAME ": timed out %s", what);
  }
}

static pg_status_t transfer(int fd, unsigned char* buffer, size_t size, int sending,
                            int64_t deadline, const char* what) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = sending ? send(fd, buffer + done, size - done, MSG_NOSIGNAL)
                        : recv(fd, buffer + done, size - done, 0);
    if (n > 0) {
      done += (size_t)n;
    } else if (n == 0) {
      return tcp_fail(PG_ERR_PEER_LOST, EXAMPLE_TCP_NAME ": connection closed %s", what);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pg_status_t status = wait_fd(fd, sending ? POLLOUT : POLLIN, deadline, what);
      if (status != PG_OK) return status;
    } else if (errno != EINTR) {
      return tcp_fail(PG_ERR_PEER_LOST, EXAMPLE_TCP_NAME ": %s: %s", what, strerror(errno));
    }
  }
  return PG_OK;
}

static void endpoint_key(int rank, char* key, size_t size) {
  snprintf(key, size, "example_tcp/endpoint/%d", rank);
}

/* Fetches a lower rank's endpoint from the store (waiting for it) and connects. */
static pg_status_t connect_to(tcp_group_t* group, const pg_host_store_t* store, int peer,
                              int64_t deadline) {
  char key[64], what[160], text[128];
  endpoint_key(peer, key, sizeof key);
  void* value = NULL;
  uint64_t length = 0;
  pg_status_t status = store->get(store->ctx, key, remaining_ms(deadline), &value, &length);
  if (status != PG_OK) {
    return tcp_fail(status,
                    EXAMPLE_TCP_NAME
                    ": rank %d: rank %d's endpoint did not appear in "
                    "the store (%s); did every rank create the group?",
                    group->rank, peer, status == PG_ERR_TIMEOUT ? "timed out" : "store error");
  }
  snprintf(text, sizeof text, "%.*s", (int)(length < 127 ? length : 127), (const char*)value);
  store->free_value(store->ctx, value);
  char address[64];
  unsigned port = 0;
  unsigned long long cookie = 0;
  struct sockaddr_in target = {.sin_family = AF_INET};
  if (sscanf(text, "%63s %u %llx", address, &port, &cookie) != 3 || port > 65535 ||
      inet_pton(AF_INET, address, &target.sin_addr) != 1) {
    return tcp_fail(PG_ERR_BACKEND, EXAMPLE_TCP_NAME ": malformed endpoint '%s' of rank %d", text,
                    peer);
  }
  target.sin_port = htons((uint16_t)port);
  snprintf(what, sizeof what, "connecting rank %d to rank %d at %s:%u", group->rank, peer, address,
           port);

  for (;;) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || prepare_fd(fd) != 0) {
      if (fd >= 0) close(fd);
      return tcp_fail(PG_ERR_BACKEND, EXAMPLE_TCP_NAME ": socket: %s", strerror(errno));
    }
    int rc = connect(fd, (const struct sockaddr*)&target, sizeof target);
    int error = rc == 0 ? 0 : errno;
    if (error == EINPROGRESS) {
      status = wait_fd(fd, POLLOUT, deadline, what);
      socklen_t size = sizeof error;
      if (status == PG_OK) getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
    }
    if (status == PG_OK && error == 0) {
      unsigned char hello[kHelloSize], ack[kAckSize];
      put_u32(hello, kMagic);
      put_u32(hello + 4, kProtocol);
      put_u32(hello + 8, (uint32_t)group->rank);
      put_u32(hello + 12, (uint32_t)group->size);
      put_u64(hello + 16, cookie);
      status = transfer(fd, hello, sizeof hello, 1, deadline, what);
      if (status == PG_OK) status = transfer(fd, ack, sizeof ack, 0, deadline, what);
      if (status == PG_OK && (get_u32(ack) != kMagic || get_u32(ack + 4) != (uint32_t)peer ||
                              get_u32(ack + 8) != (uint32_t)group->size)) {
        status = tcp_fail(PG_ERR_BACKEND, EXAMPLE_TCP_NAME ": %s: unexpected answer", what);
      }
      if (status != PG_OK) {
        close(fd);
        return status;
      }
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      group->peers[peer].fd = fd;
      return PG_OK;
    }
    close(fd);
    if (status != PG_OK) return status;
    /* Refused: the peer's listener is published before it listens? Never, but a reset
     * under load is worth a retry within the deadline. */
    if (remaining_ms(deadline) == 0) {
      return tcp_fail(PG_ERR_TIMEOUT, EXAMPLE_TCP_NAME ": %s: %s", what, strerror(error));
    }
    poll(NULL, 0, 10);
  }
}

/* Accepts a connection from every higher rank, turning away anything else. */
static pg_status_t accept_higher(tcp_group_t* group, int listener, uint64_t cookie,
                                 int64_t deadline) {
  int missing = group->size - 1 - group->rank;
  while (missing > 0) {
    char what[TCP_MESSAGE_MAX];
    int at = snprintf(what, sizeof what, "waiting for rank(s)");
    for (int r = group->rank + 1; r < group->size && at < (int)sizeof what - 16; ++r)
      if (group->peers[r].fd < 0) at += snprintf(what + at, sizeof what - (size_t)at, " %d", r);
    snprintf(what + at, sizeof what - (size_t)at, " to connect to rank %d", group->rank);
    pg_status_t status = wait_fd(listener, POLLIN, deadline, what);
    if (status != PG_OK) return status;
    int fd = accept(listener, NULL, NULL);
    if (fd < 0) continue; /* EAGAIN, ECONNABORTED, ...: try again */
    unsigned char hello[kHelloSize];
    const int64_t hello_deadline =
        deadline < tcp_now_ms() + kMaxHelloMs ? deadline : tcp_now_ms() + kMaxHelloMs;
    int rank = -1;
    if (prepare_fd(fd) == 0 &&
        transfer(fd, hello, sizeof hello, 0, hello_deadline, "reading a hello") == PG_OK) {
      rank = (int32_t)get_u32(hello + 8);
      if (get_u32(hello) != kMagic || get_u32(hello + 4) != kProtocol ||
          get_u32(hello + 12) != (uint32_t)group->size || get_u64(hello + 16) != cookie ||
          rank <= group->rank || rank >= group->size || group->peers[rank].fd >= 0) {
        rank = -1;
      }
    }
    unsigned char ack[kAckSize];
    put_u32(ack, kMagic);
    put_u32(ack + 4, (uint32_t)group->rank);
    put_u32(ack + 8, (uint32_t)group->size);
    if (rank < 0 || transfer(fd, ack, sizeof ack, 1, deadline, "answering a hello") != PG_OK) {
      tcp_log(PG_LOG_WARN, "rank %d: turned away a connection that is not a peer of this group",
              group->rank);
      close(fd);
      continue;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    group->peers[rank].fd = fd;
    --missing;
  }
  return PG_OK;
}

static uint64_t random_cookie(void) {
  uint64_t cookie = 0;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = read(fd, &cookie, sizeof cookie);
    close(fd);
    if (n == (ssize_t)sizeof cookie) return cookie;
  }
  return (uint64_t)tcp_now_ms() * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid();
}

pg_status_t tcp_connect_mesh(tcp_group_t* group, const pg_backend_group_config_t* config) {
  const int64_t deadline = tcp_now_ms() + group->timeout_ms;
  const pg_host_store_t* store = config->store;
  if (group->size == 1) return PG_OK; /* messages to self need no socket */

  struct sockaddr_in self = {.sin_family = AF_INET};
  pg_status_t status = local_address(config->master_addr, &self.sin_addr);
  if (status != PG_OK) return status;
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  socklen_t length = sizeof self;
  if (listener < 0 || prepare_fd(listener) != 0 ||
      bind(listener, (const struct sockaddr*)&self, sizeof self) != 0 ||
      listen(listener, group->size) != 0 ||
      getsockname(listener, (struct sockaddr*)&self, &length) != 0) {
    status = tcp_fail(PG_ERR_BACKEND, EXAMPLE_TCP_NAME ": cannot listen: %s", strerror(errno));
    if (listener >= 0) close(listener);
    return status;
  }

  char key[64], value[96], address[INET_ADDRSTRLEN];
  const uint64_t cookie = random_cookie();
  inet_ntop(AF_INET, &self.sin_addr, address, sizeof address);
  const int n = snprintf(value, sizeof value, "%s %u %llx", address, ntohs(self.sin_port),
                         (unsigned long long)cookie);
  endpoint_key(group->rank, key, sizeof key);
  status = store->set(store->ctx, key, value, (uint64_t)n);
  if (status != PG_OK) {
    status = tcp_fail(status, EXAMPLE_TCP_NAME ": cannot publish rank %d's endpoint in the store",
                      group->rank);
  }
  for (int peer = 0; status == PG_OK && peer < group->rank; ++peer) {
    status = connect_to(group, store, peer, deadline);
  }
  if (status == PG_OK) status = accept_higher(group, listener, cookie, deadline);
  close(listener);
  /* Every higher rank has read the endpoint once it connected: the key can go. */
  if (status == PG_OK && store->struct_size >= offsetof(pg_host_store_t, remove) + sizeof(void*) &&
      store->remove != NULL) {
    store->remove(store->ctx, key);
  }
  return status; /* on failure, group_free closes the peers' fds */
}
