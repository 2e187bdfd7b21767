/* Fd readiness: the fd table (fd -> callback, generation) under io_lock, the public
 * evloop_io_* calls, and dispatch of what the backend reports. Each registration gets a
 * new generation carried in the backend tag, so readiness reported for a removed (or
 * removed and re-added) fd is dropped: no callback starts after evloop_io_remove().
 * Registering the first fd or removing the last switches the loop between futex sleep
 * and poller sleep; from another thread that change wakes the loop (evloop__kick). */
#include <fcntl.h>
#include <stdlib.h>

#include "loop.h"

#define IO_EVENTS_IN (EVLOOP_READABLE | EVLOOP_WRITABLE)

static uint64_t make_tag(int fd, uint32_t gen)
{
    return (uint64_t)gen << 32 | (uint32_t)fd;
}

static int check_events(unsigned events)
{
    return events == 0 || (events & ~IO_EVENTS_IN) ? -EINVAL : 0;
}

static int check_fd_open(int fd)
{
    if (fd < 0)
        return -EBADF;
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

static void count_change(evloop *loop, bool added)
{
    /* seq_cst: pairs with the re-read of nfds in prepare_sleep() (tick.c). */
    uint32_t before = added ? atomic_fetch_add(&loop->nfds, 1) : atomic_fetch_sub(&loop->nfds, 1);
    bool switched = added ? before == 0 : before == 1;
    if (switched && !evloop__on_loop_thread(loop))
        evloop__kick(loop);
}

EVLOOP_API int evloop_io_add(evloop *loop, int fd, unsigned events, evloop_io_cb cb, void *arg)
{
    if (!loop || !cb)
        return -EINVAL;
    int r = check_events(events);
    if (r == 0)
        r = check_fd_open(fd);
    if (r < 0)
        return r;
    pthread_mutex_lock(&loop->io_lock);
    if (atomic_load_explicit(&loop->stopping, memory_order_relaxed))
        r = -ESHUTDOWN;
    else
        r = reserve_fd(loop, fd);
    if (r == 0 && loop->fds[fd].active)
        r = -EEXIST;
    if (r == 0) {
        struct evloop__fd *e = &loop->fds[fd];
        r = loop->backend->add(loop->backend_state, fd, events, make_tag(fd, e->gen + 1));
        if (r == 0)
            *e = (struct evloop__fd){cb, arg, e->gen + 1, events, true};
    }
    pthread_mutex_unlock(&loop->io_lock);
    if (r == 0)
        count_change(loop, true);
    return r;
}

EVLOOP_API int evloop_io_modify(evloop *loop, int fd, unsigned events)
{
    if (!loop)
        return -EINVAL;
    int r = check_events(events);
    if (r == 0)
        r = check_fd_open(fd);
    if (r < 0)
        return r;
    pthread_mutex_lock(&loop->io_lock);
    if (atomic_load_explicit(&loop->stopping, memory_order_relaxed))
        r = -ESHUTDOWN;
    else if (fd >= loop->fds_cap || !loop->fds[fd].active)
        r = -ENOENT;
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
    pthread_mutex_lock(&loop->io_lock);
    if (fd < loop->fds_cap && loop->fds[fd].active) {
        drop_fd(loop, fd);
        r = 0;
    }
    pthread_mutex_unlock(&loop->io_lock);
    if (r == 0)
        count_change(loop, false);
    return r;
}

/* Loop thread: the callback for one report, or false when the report is stale. */
static bool lookup(evloop *loop, uint64_t tag, evloop_io_cb *cb, void **arg)
{
    int fd = (int)(uint32_t)tag;
    bool live = false;
    pthread_mutex_lock(&loop->io_lock);
    if (fd < loop->fds_cap && loop->fds[fd].active && loop->fds[fd].gen == (uint32_t)(tag >> 32)) {
        *cb = loop->fds[fd].cb;
        *arg = loop->fds[fd].arg;
        live = true;
    }
    pthread_mutex_unlock(&loop->io_lock);
    return live;
}

int evloop__poll_io(evloop *loop, int64_t timeout_ns)
{
    struct evloop__io_event ev[EVLOOP__IO_EVENTS_MAX];
    int n = loop->backend->wait(loop->backend_state, timeout_ns, ev, EVLOOP__IO_EVENTS_MAX);
    if (n < 0)
        return n;
    for (int i = 0; i < n; i++) {
        evloop_io_cb cb;
        void *arg;
        /* Looked up one at a time: an earlier callback may have removed this fd. */
        if (!lookup(loop, ev[i].tag, &cb, &arg))
            continue;
        cb(arg, (int)(uint32_t)ev[i].tag, ev[i].events);
        evloop__count(&loop->stats.io_callbacks, 1);
        evloop__drain_microtasks(loop);
    }
    return 0;
}

void evloop__release_fds(evloop *loop)
{
    pthread_mutex_lock(&loop->io_lock);
    for (int fd = 0; fd < loop->fds_cap; fd++)
        if (loop->fds[fd].active)
            drop_fd(loop, fd);
    atomic_store(&loop->nfds, 0);
    pthread_mutex_unlock(&loop->io_lock);
}
