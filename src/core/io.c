/* Fd readiness: the fd table (fd -> callback, generation) under io_lock, its one owner; the
 * public evloop_io_* calls, and the callbacks of what the backend reports for a registered fd
 * (tick_poll.c hands each report here or to ops.c). Each registration gets a new generation
 * carried in the backend tag, so readiness reported for a removed (or removed and re-added)
 * fd is dropped: no callback starts after evloop_io_remove(). Registering the first fd or
 * removing the last switches the loop between futex sleep and poller sleep; from another
 * thread that change wakes the loop (evloop__sleep_kick). */
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>

#include "callback.h"
#include "io.h"
#include "release.h"

#define IO_EVENTS_IN (EVLOOP_READABLE | EVLOOP_WRITABLE)

static void wait_dispatch_done(evloop *loop, int fd);

/* The generation keeps below bit 63, which marks the tags of ops (state_ops.h). */
#define GEN_MASK 0x7fffffffu

static uint64_t make_tag(int fd, uint32_t gen)
{
    return (uint64_t)(gen & GEN_MASK) << 32 | (uint32_t)fd;
}

static int check_events(unsigned events)
{
    return events == 0 || (events & ~IO_EVENTS_IN) ? -EINVAL : 0;
}

/* evloop_io_add checks an fd beyond the table before the table grows for it, so a bogus fd
 * (1 << 29) never allocates, and evloop_io_modify an fd it does not know; for the others the
 * poller's own call reports a closed fd (-EBADF) at no extra syscall. */
static int check_fd_open(int fd)
{
    return fcntl(fd, F_GETFD) < 0 ? -errno : 0;
}

/* Under io_lock: makes room for fd in the table. */
static int reserve_fd(evloop *loop, int fd)
{
    if (fd < loop->fds_cap)
        return 0;
    int cap = loop->fds_cap ? loop->fds_cap : 64;
    while (cap <= fd)
        cap *= 2;
    struct evloop__fd *fds = realloc(loop->fds, (size_t)cap * sizeof(*fds));
    if (!fds)
        return -ENOMEM;
    for (int i = loop->fds_cap; i < cap; i++)
        fds[i] = (struct evloop__fd){0};
    loop->fds = fds;
    loop->fds_cap = cap;
    return 0;
}

/* Under io_lock, so nfds never reads 0 while an fd is registered: counts one fd in or
 * out and says whether that switched the loop between futex and poller sleep. */
static bool count_change(evloop *loop, bool added)
{
    /* seq_cst: pairs with the re-read of nfds in prepare_sleep() (tick.c). */
    uint32_t before = added ? atomic_fetch_add(&loop->nfds, 1) : atomic_fetch_sub(&loop->nfds, 1);
    return added ? before == 0 : before == 1;
}

/* After io_lock is released: a switch made from another thread wakes the loop, which may
 * be asleep in the other mode. */
static void announce_switch(evloop *loop, bool switched)
{
    if (switched && !evloop__on_loop_thread(loop))
        evloop__sleep_kick(&loop->sleep);
}

EVLOOP_API int evloop_io_add(evloop *loop, int fd, unsigned events, evloop_io_cb cb, void *arg)
{
    if (!loop || !cb)
        return -EINVAL;
    int r = check_events(events);
    if (r == 0 && fd < 0)
        r = -EBADF;
    if (r < 0)
        return r;
    pthread_mutex_lock(&loop->io_lock);
    if (atomic_load_explicit(&loop->stopping, memory_order_relaxed))
        r = -ESHUTDOWN;
    else if (fd >= loop->fds_cap && (r = check_fd_open(fd)) == 0) /* see check_fd_open */
        r = reserve_fd(loop, fd);
    if (r == 0 && loop->fds[fd].active)
        r = -EEXIST;
    if (r == 0)
        r = loop->fd_claim(loop, fd); /* ops.c: -EBUSY while operations are pending on fd */
    if (r == 0) {
        struct evloop__fd *e = &loop->fds[fd];
        r = loop->backend->add(loop->backend_state, fd, events, make_tag(fd, e->gen + 1));
        if (r == 0)
            *e = (struct evloop__fd){cb, arg, e->gen + 1, events, true};
    }
    bool switched = r == 0 && count_change(loop, true);
    pthread_mutex_unlock(&loop->io_lock);
    announce_switch(loop, switched);
    return r;
}

EVLOOP_API int evloop_io_modify(evloop *loop, int fd, unsigned events)
{
    if (!loop)
        return -EINVAL;
    int r = check_events(events);
    if (r == 0 && fd < 0)
        r = -EBADF;
    if (r < 0)
        return r;
    pthread_mutex_lock(&loop->io_lock);
    if (atomic_load_explicit(&loop->stopping, memory_order_relaxed))
        r = -ESHUTDOWN;
    else if (fd >= loop->fds_cap || !loop->fds[fd].active)
        r = check_fd_open(fd) < 0 ? -EBADF : -ENOENT; /* closed and unknown: -EBADF */
    else
        r = loop->backend->modify(loop->backend_state, fd, events, make_tag(fd, loop->fds[fd].gen));
    if (r == 0)
        loop->fds[fd].events = events;
    pthread_mutex_unlock(&loop->io_lock);
    return r;
}

/* Under io_lock: unregisters an active fd; its pending readiness becomes stale. */
static void drop_fd(evloop *loop, int fd)
{
    struct evloop__fd *e = &loop->fds[fd];
    loop->backend->remove(loop->backend_state, fd);
    e->active = false;
    e->gen++;
}

EVLOOP_API int evloop_io_remove(evloop *loop, int fd)
{
    if (!loop)
        return -EINVAL;
    if (fd < 0)
        return -EBADF;
    int r = -ENOENT;
    bool switched = false;
    pthread_mutex_lock(&loop->io_lock);
    if (fd < loop->fds_cap && loop->fds[fd].active) {
        drop_fd(loop, fd);
        switched = count_change(loop, false);
        r = 0;
    }
    pthread_mutex_unlock(&loop->io_lock);
    if (r == 0 && !evloop__on_loop_thread(loop))
        wait_dispatch_done(loop, fd);
    announce_switch(loop, switched);
    return r;
}

/* Another thread's remove returns only once a callback the loop already took for fd
 * has returned, so nothing runs for fd after remove: a short wait (callbacks run to
 * completion); the caller must not hold anything that callback waits for. */
static void wait_dispatch_done(evloop *loop, int fd)
{
    /* acquire: pairs with the release store of -1 in evloop__io_dispatch(). */
    while (atomic_load_explicit(&loop->dispatch_fd, memory_order_acquire) == fd)
        sched_yield();
}

/* Loop thread: takes the callback for one report (and marks fd as being dispatched), or
 * returns false when the report is stale. Events no longer asked for (a modify made
 * since the wait) are dropped; hang-up and error always pass. */
static bool lookup(evloop *loop, const struct evloop__io_event *ev, evloop_io_cb *cb, void **arg,
                   unsigned *events)
{
    int fd = (int)(uint32_t)ev->tag;
    bool live = false;
    pthread_mutex_lock(&loop->io_lock);
    struct evloop__fd *e = fd < loop->fds_cap ? &loop->fds[fd] : NULL;
    if (e && e->active && (e->gen & GEN_MASK) == (uint32_t)(ev->tag >> 32)) {
        *events = ev->events & (e->events | EVLOOP_HANGUP | EVLOOP_ERROR);
        *cb = e->cb;
        *arg = e->arg;
        live = *events != 0;
        if (live)
            atomic_store_explicit(&loop->dispatch_fd, fd, memory_order_relaxed);
    }
    pthread_mutex_unlock(&loop->io_lock);
    return live;
}

bool evloop__io_has_fd(const evloop *loop, int fd)
{
    return fd >= 0 && fd < loop->fds_cap && loop->fds[fd].active;
}

void evloop__io_dispatch(evloop *loop, const struct evloop__io_event *ev)
{
    evloop_io_cb cb;
    void *arg;
    unsigned events;
    /* Looked up one at a time: an earlier callback may have removed this fd. */
    if (!lookup(loop, ev, &cb, &arg, &events))
        return;
    cb(arg, (int)(uint32_t)ev->tag, events);
    /* release: pairs with the acquire in wait_dispatch_done(). */
    atomic_store_explicit(&loop->dispatch_fd, -1, memory_order_release);
    evloop__count(&loop->stats.io_callbacks, 1);
    evloop__drain_microtasks(loop);
}

/* At termination, before the table is dropped: each fd still registered is removed
 * through evloop_io_remove, one at a time with io_lock released, and its argument goes to
 * the release notification, unless another thread's evloop_io_remove got it first. */
static void release_fd_args(evloop *loop)
{
    for (int fd = 0;; fd++) {
        pthread_mutex_lock(&loop->io_lock);
        while (fd < loop->fds_cap && !loop->fds[fd].active)
            fd++;
        bool found = fd < loop->fds_cap;
        void *arg = found ? loop->fds[fd].arg : NULL;
        pthread_mutex_unlock(&loop->io_lock);
        if (!found)
            return;
        if (evloop_io_remove(loop, fd) == 0)
            evloop__released(loop, arg);
    }
}

void evloop__release_fds(evloop *loop)
{
    release_fd_args(loop);
    pthread_mutex_lock(&loop->io_lock);
    for (int fd = 0; fd < loop->fds_cap; fd++)
        if (loop->fds[fd].active)
            drop_fd(loop, fd);
    atomic_store(&loop->nfds, 0);
    pthread_mutex_unlock(&loop->io_lock);
}

void evloop__io_init(evloop *loop)
{
    pthread_mutex_init(&loop->io_lock, NULL);
    atomic_init(&loop->dispatch_fd, -1);
}

void evloop__io_destroy(evloop *loop)
{
    free(loop->fds);
    loop->fds = NULL;
    loop->fds_cap = 0;
    pthread_mutex_destroy(&loop->io_lock);
}
