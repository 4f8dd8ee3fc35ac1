/* tcp_work.c — a work: a status that becomes final once, and a condition to wait for it.
 *
 * A work is shared by the caller's handle and the operation that will complete it, each
 * holding a reference; whoever lets go last frees it. So work_release on a pending work is
 * safe (the operation completes it alone), and a work may outlive its group.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tcp_internal.h"

static tcp_work_t* work_alloc(int refs) {
  tcp_work_t* work = calloc(1, sizeof *work);
  if (work == NULL) return NULL;
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  /* Waits are measured on the monotonic clock, immune to wall-clock jumps. */
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&work->cv, &attr);
  pthread_condattr_destroy(&attr);
  pthread_mutex_init(&work->mu, NULL);
  atomic_init(&work->refs, refs);
  work->status = PG_PENDING;
  return work;
}

tcp_work_t* tcp_work_new(void) { return work_alloc(2); }

void tcp_work_unref(tcp_work_t* work) {
  if (atomic_fetch_sub(&work->refs, 1) != 1) return;
  pthread_cond_destroy(&work->cv);
  pthread_mutex_destroy(&work->mu);
  free(work);
}

void tcp_work_complete(tcp_work_t* work, pg_status_t status, const char* message) {
  pthread_mutex_lock(&work->mu);
  if (!work->done) {
    work->done = 1;
    work->status = status;
    if (message != NULL) {
      strncpy(work->message, message, sizeof work->message - 1);
      work->message[sizeof work->message - 1] = '\0';
    }
    pthread_cond_broadcast(&work->cv);
  }
  pthread_mutex_unlock(&work->mu);
}

/* Reads the final status; an error's message goes to the host on this (the caller's)
 * thread, as procgroup_backend.h asks of every entry. */
static pg_status_t report_locked(tcp_work_t* work) {
  if (!work->done) return PG_PENDING;
  if (work->status != PG_OK) return tcp_fail(work->status, "%s", work->message);
  return PG_OK;
}

pg_status_t tcp_work_test(tcp_work_t* work) {
  pthread_mutex_lock(&work->mu);
  pg_status_t status = report_locked(work);
  pthread_mutex_unlock(&work->mu);
  return status;
}

pg_status_t tcp_work_wait(tcp_work_t* work, int64_t timeout_ms) {
  pthread_mutex_lock(&work->mu);
  if (timeout_ms < 0) {
    /* Every op has a deadline that the progress thread enforces, so this ends. */
    while (!work->done) pthread_cond_wait(&work->cv, &work->mu);
  } else {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (timeout_ms % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) {
      until.tv_sec += 1;
      until.tv_nsec -= 1000000000;
    }
    while (!work->done) {
      if (pthread_cond_timedwait(&work->cv, &work->mu, &until) == ETIMEDOUT) break;
    }
  }
  pg_status_t status = report_locked(work);
  pthread_mutex_unlock(&work->mu);
  return status;
}
