/* Backend "kqueue" (macOS, the BSDs): level-triggered EVFILT_READ / EVFILT_WRITE readiness and
 * an EVFILT_USER event for wake-ups. Implements the evloop__backend vtable (backend.h). Only
 * kqueue and POSIX calls: on Linux it builds against libkqueue (EVLOOP_WITH_KQUEUE) for tests.
 *
 * Traps of the OS API:
 *  a. Read and write readiness are two filters and come as two kevents: the wait merges the
 *     reports of one fd, so the core calls back once per fd and wait, as with epoll.
 *  b. A change that fails in a batch with no room for receipts stops the batch: each filter
 *     is changed with its own kevent() call, so each error is known.
 *  c. Deleting a filter that was never added fails with ENOENT, and a closed fd has lost its
 *     filters already (EBADF): for remove, both mean "already gone".
 *  d. udata is a pointer: the 64-bit tag rides in it, which needs 64-bit pointers.
 *  e. EV_EOF flags the peer's close (data may still be readable); with it, fflags holds the
 *     socket error, if any. EV_ERROR in a returned event means data holds an errno.
 *  f. EVFILT_USER needs EV_CLEAR, or it stays triggered once triggered. OpenBSD lacks it: there
 *     a non-blocking pipe wakes the wait instead (EVLOOP_KQUEUE_PIPE_WAKE forces that path).
 *  g. The timeout is a timespec: nothing rounds it, so timers never fire early.
 *  h. kqueue descriptors are not inherited across fork, but do survive exec: FD_CLOEXEC.
 *  i. libkqueue (Linux) refuses EV_ADD on a socket's registered read filter, without errno:
 *     modify deletes and re-adds each filter it keeps, which native kqueue does as well.
 *  j. A kqueue fd polls readable while it has an event to report, and another kqueue can
 *     watch it with EVFILT_READ: evloop_backend_fd is a kqueue of its own holding a pipe's
 *     read end (the wake of a parked loop) and, while the core has it watch, this kqueue.
 *  k. libkqueue (Linux) hands out the write end of a pipe as a kqueue's fd, which never polls
 *     readable: once made, evloop_backend_fd's kqueue must poll readable after its wake, or
 *     it is refused with -ENOTSUP. */
#include <sys/types.h>
#include <sys/event.h>
#include <sys/time.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#include "backend.h"
#include "common.h"
#include "evloop.h"

#if defined(EVFILT_USER) && !defined(EVLOOP_KQUEUE_PIPE_WAKE)
#define USER_WAKE 1
#endif
#define WAKE_IDENT 0        /* the EVFILT_USER event's ident (its own namespace, not an fd) */
#define WAKE_TAG UINT64_MAX /* udata of the wake pipe's read end (pipe wake only) */
#define MAX_EVENTS 64

_Static_assert(sizeof(void *) >= sizeof(uint64_t), "the tag rides in kevent.udata (trap d)");

struct kq_state {
    int kq;
    int pipe[2];                   /* the wake pipe, -1 with EVFILT_USER */
    struct evloop__pollable embed; /* evloop_backend_fd's, once made (trap j); -1s before */
};

static int change(int kq, uintptr_t ident, short filter, unsigned short flags, unsigned fflags,
                  uint64_t tag)
{
    struct kevent ev;
    EV_SET(&ev, ident, filter, flags, fflags, 0, (void *)(uintptr_t)tag);
    errno = 0; /* trap i: libkqueue can fail without setting it */
    return kevent(kq, &ev, 1, NULL, 0, NULL) < 0 ? (errno ? -errno : -EIO) : 0;
}

static int set_flags(int fd, bool nonblock)
{
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
        return -errno;
    int fl = fcntl(fd, F_GETFL);
    return nonblock && (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) ? -errno : 0;
}

static int open_wake(struct kq_state *s)
{
#ifdef USER_WAKE
    return change(s->kq, WAKE_IDENT, EVFILT_USER, EV_ADD | EV_CLEAR, 0, 0);
#else
    int r = pipe(s->pipe) < 0 ? -errno : 0;
    if (r == 0 && (r = set_flags(s->pipe[0], true)) == 0 && (r = set_flags(s->pipe[1], true)) == 0)
        r = change(s->kq, (uintptr_t)s->pipe[0], EVFILT_READ, EV_ADD, 0, WAKE_TAG);
    return r;
#endif
}

static void close_all(const int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

static void kq_destroy(void *state)
{
    struct kq_state *s = state;
    close_all(s->pipe, 2);
    close_all((const int[]){s->embed.fd, s->embed.wake_fd, s->embed.drain_fd}, 3);
    close(s->kq);
    free(s);
}

static int kq_init(void **out, _Atomic uint32_t *word, unsigned *caps)
{
    (void)word;
    *caps = 0;
    struct kq_state *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->pipe[0] = s->pipe[1] = -1;
    s->embed = (struct evloop__pollable){-1, -1, -1};
    s->kq = kqueue();
    if (s->kq < 0) {
        int r = -errno;
        free(s);
        return r == -ENOSYS ? -ENOTSUP : r;
    }
    int r = set_flags(s->kq, false);
    if (r == 0)
        r = open_wake(s);
    if (r < 0) {
        kq_destroy(s);
        return r;
    }
    *out = s;
    return 0;
}

/* Sets one filter of fd: deleted (if it was there), then added again if wanted (trap i). */
static int set_filter(struct kq_state *s, int fd, short filter, bool wanted, uint64_t tag)
{
    int r = change(s->kq, (uintptr_t)fd, filter, EV_DELETE, 0, 0);
    if (r == 0 || r == -ENOENT)
        r = wanted ? change(s->kq, (uintptr_t)fd, filter, EV_ADD, 0, tag) : 0;
    return r;
}

static int kq_add(void *state, int fd, uint32_t events, uint64_t tag)
{
    struct kq_state *s = state;
    int r = 0;
    if (events & EVLOOP_READABLE)
        r = change(s->kq, (uintptr_t)fd, EVFILT_READ, EV_ADD, 0, tag);
    if (r == 0 && (events & EVLOOP_WRITABLE))
        r = change(s->kq, (uintptr_t)fd, EVFILT_WRITE, EV_ADD, 0, tag);
    if (r < 0 && (events & EVLOOP_READABLE))
        set_filter(s, fd, EVFILT_READ, false, 0); /* no half registration */
    return r;
}

static int kq_modify(void *state, int fd, uint32_t events, uint64_t tag)
{
    struct kq_state *s = state;
    int r = set_filter(s, fd, EVFILT_READ, events & EVLOOP_READABLE, tag);
    return r < 0 ? r : set_filter(s, fd, EVFILT_WRITE, events & EVLOOP_WRITABLE, tag);
}

static int kq_remove(void *state, int fd)
{
    struct kq_state *s = state;
    int r = set_filter(s, fd, EVFILT_READ, false, 0);
    int w = set_filter(s, fd, EVFILT_WRITE, false, 0);
    r = r < 0 ? r : w;
    return r == -EBADF ? 0 : r; /* trap c */
}

static uint32_t from_kevent(const struct kevent *ev)
{
    if (ev->flags & EV_ERROR)
        return EVLOOP_ERROR;
    uint32_t e = ev->filter == EVFILT_READ ? EVLOOP_READABLE : EVLOOP_WRITABLE;
    if (ev->flags & EV_EOF)
        e |= EVLOOP_HANGUP | (ev->fflags ? EVLOOP_ERROR : 0u);
    return e;
}

/* Merges the kevents into one report per fd (trap a); O(n^2) in at most MAX_EVENTS. */
static int dispatch(struct kq_state *s, const struct kevent *ev, int n,
                    struct evloop__io_event *out)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        uint64_t tag = (uint64_t)(uintptr_t)ev[i].udata;
        if (ev[i].filter == EVFILT_READ && tag == WAKE_TAG && (int)ev[i].ident == s->pipe[0]) {
            char buf[64];
            while (read(s->pipe[0], buf, sizeof(buf)) > 0)
                ;
            continue;
        }
        if (ev[i].filter != EVFILT_READ && ev[i].filter != EVFILT_WRITE)
            continue; /* the EVFILT_USER wake */
        int j = 0;
        while (j < k && out[j].tag != tag)
            j++;
        if (j == k)
            out[k++] = (struct evloop__io_event){tag, 0, 0};
        out[j].events |= from_kevent(&ev[i]);
    }
    return k;
}

static int kq_wait(void *state, int64_t timeout_ns, struct evloop__io_event *out, int max)
{
    struct kq_state *s = state;
    struct kevent ev[MAX_EVENTS];
    struct timespec ts = evloop__ns_to_timespec((uint64_t)(timeout_ns < 0 ? 0 : timeout_ns));
    int n = kevent(s->kq, NULL, 0, ev, max < MAX_EVENTS ? max : MAX_EVENTS,
                   timeout_ns < 0 ? NULL : &ts); /* trap g */
    if (n < 0)
        return errno == EINTR ? 0 : -errno;
    return dispatch(s, ev, n, out);
}

static int kq_wake(void *state)
{
    struct kq_state *s = state;
#ifdef USER_WAKE
    return change(s->kq, WAKE_IDENT, EVFILT_USER, 0, NOTE_TRIGGER, 0);
#else
    /* EAGAIN: the pipe is full of wake-ups already, so the loop wakes anyway. */
    return write(s->pipe[1], "", 1) < 0 && errno != EAGAIN ? -errno : 0;
#endif
}

/* Trap k: whether a wake makes set poll readable; the pipe is drained again after. */
static int check_pollable(int set, int wake_fd, int drain_fd)
{
    uint64_t one = 1;
    if (write(wake_fd, &one, sizeof(one)) < 0)
        return -errno;
    struct pollfd p = {.fd = set, .events = POLLIN};
    int n = poll(&p, 1, 0);
    char buf[64];
    while (read(drain_fd, buf, sizeof(buf)) > 0)
        ;
    return n == 1 && (p.revents & POLLIN) ? 0 : -ENOTSUP;
}

/* evloop_backend_fd (backend.h, trap j): a kqueue holding a non-blocking pipe's read end. */
static int kq_pollable_fd(void *state, struct evloop__pollable *out)
{
    struct kq_state *s = state;
    int set = kqueue();
    if (set < 0)
        return -errno;
    int p[2] = {-1, -1};
    int r = set_flags(set, false);
    if (r == 0)
        r = pipe(p) < 0 ? -errno : 0;
    if (r == 0 && (r = set_flags(p[0], true)) == 0 && (r = set_flags(p[1], true)) == 0)
        r = change(set, (uintptr_t)p[0], EVFILT_READ, EV_ADD, 0, 0);
    if (r == 0)
        r = check_pollable(set, p[1], p[0]);
    if (r < 0) {
        close_all((const int[]){set, p[0], p[1]}, 3);
        return r;
    }
    s->embed = (struct evloop__pollable){set, p[1], p[0]};
    *out = s->embed;
    return 0;
}

/* This kqueue in evloop_backend_fd's (on) or out: readable there while it has a report. */
static int kq_pollable_watch(void *state, bool on)
{
    struct kq_state *s = state;
    return change(s->embed.fd, (uintptr_t)s->kq, EVFILT_READ, on ? EV_ADD : EV_DELETE, 0, 0);
}

const struct evloop__backend evloop__backend_kqueue = {
    .name = "kqueue",
    .init = kq_init,
    .destroy = kq_destroy,
    .add = kq_add,
    .modify = kq_modify,
    .remove = kq_remove,
    .wait = kq_wait,
    .wake = kq_wake,
    .pollable_fd = kq_pollable_fd,
    .pollable_watch = kq_pollable_watch,
};
