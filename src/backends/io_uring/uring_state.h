/* The io_uring backend's state, shared by its two halves: io_uring.c (the vtable:
 * registrations, wakes, init and destroy, ops, the pollable fd; its header lists the traps
 * a-i of the OS API that the comments here and in ring_wait.c cite) and ring_wait.c (the
 * wait: where the loop blocks, the set or the ring, and how CQEs and the set's readiness
 * become reports). */
#ifndef EVLOOP_URING_STATE_H
#define EVLOOP_URING_STATE_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

#include "backends/epoll/epoll_embed.h"
#include "uring.h"

#define SQ_ENTRIES 256u
#define CQ_ENTRIES 1024u
#define CQE_BATCH 32u
#define MAX_REPORTS 64 /* reports per wait: what the core asks for (EVLOOP__IO_EVENTS_MAX) */
#define WAKE_TAG UINT64_MAX
#define RING_TAG (UINT64_MAX - 1)

/* user_data of the backend's own requests: kind | generation << 8 (an op's is its address,
 * native_ops.c). A request adopt() cancelled, or could not, may complete after its successor
 * was armed; its older generation marks it. */
enum { K_FUTEX = 1, K_CANCEL = 2, K_SET = 3 };

struct uring {
    struct io_uring ring;
    int epfd;
    int efd; /* the eventfd wake, in the set; -1 when the loop sleeps on its word */
    _Atomic uint32_t *word;
    bool no_pwait2; /* epoll_pwait2 said ENOSYS: epoll_wait (epoll_wait.h) */
    /* fds in the set: written by add and remove (serialised by the core, any thread), read by
     * the loop thread to choose where it blocks (trap i). */
    _Atomic uint32_t nactive;
    /* The loop thread's: what is in flight, and which thread armed it (trap b). fresh: the
     * CQEs reaped now came in this wait's enter, not before it. */
    bool fresh;
    bool set_armed, set_ready; /* a POLL_ADD on the set is in flight; one said "look" */
    uint32_t queued_ops;       /* op starts and cancels queued since the last submission */
    bool ring_in_set;          /* the ring's fd is in the set (traps g and h) */
    uint64_t gen;
    pthread_t armed_by;
    pthread_mutex_t lock;     /* pollset */
    int pollset;              /* epfd and the ring's fd, nested in embed; -1 until asked */
    struct evloop__pollable embed; /* evloop_backend_fd's, once made (epoll_embed.h) */
    atomic_bool futex_armed;  /* also read by remove and destroy */
    atomic_bool wake_pending; /* word mode: wake() asked the next wait not to block */
    struct epoll_event events[MAX_REPORTS];
};

/* Any thread: epoll_ctl on the set; 0 or -errno. */
static inline int evloop__uring_ctl(struct uring *s, int op, int fd, uint32_t events,
                                    uint64_t tag)
{
    struct epoll_event ev = {.events = events, .data.u64 = tag};
    return epoll_ctl(s->epfd, op, fd, &ev) < 0 ? -errno : 0;
}

/* The user_data of one of the backend's own requests, of this generation. */
static inline uint64_t evloop__uring_udata(const struct uring *s, unsigned kind)
{
    return s->gen << 8 | kind;
}

/* Loop thread: the backend's wait (backend.h), ring_wait.c. */
int evloop__uring_wait(void *state, int64_t timeout_ns, struct evloop__io_event *out, int max);

#endif
