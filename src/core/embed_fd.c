/* evloop_backend_fd and evloop_backend_timeout_ns (design.md, "Embedding"), a subsystem. The
 * fd is made by the backend (backend.h, pollable_fd): a set of its system's poller holding a
 * wake fd and, while fds are registered, wait()'s readiness. Between two evloop_run_once
 * calls the loop is parked: its sleep word holds SLEEP_EXTERNAL (sleep.h), so the producer
 * that flips it makes the one wake call of the protocol, a write to the wake fd. A run ends a
 * park when it starts (word back to AWAKE, wake fd drained); evloop_run_once parks again
 * before it returns (run_once.c, tick.c): readable exactly while work is ready. */
#include <unistd.h>

#include "embed_fd.h"
#include "timer.h"

void evloop__embed_init(evloop *loop)
{
    pthread_mutex_init(&loop->embed_lock, NULL);
    atomic_init(&loop->embed_fd, -1);
    loop->embed = (struct evloop__pollable){-1, -1, -1};
}

void evloop__embed_destroy(evloop *loop)
{
    pthread_mutex_destroy(&loop->embed_lock); /* the fds are the backend's: destroy closed them */
}

static void set_readable(evloop *loop)
{
    uint64_t one = 1;
    ssize_t n = write(loop->embed.wake_fd, &one, sizeof(one)); /* EAGAIN: it already is */
    (void)n;
}

/* Under embed_lock: the backend makes the fd. Returns it or -errno. */
static int make_fd(evloop *loop)
{
    struct evloop__pollable p;
    int r = loop->backend->pollable_fd(loop->backend_state, &p);
    if (r < 0)
        return r;
    loop->embed = p;
    loop->sleep.external_fd = p.wake_fd;
    /* Not parked yet: readable until an evloop_run_once parks the loop. */
    set_readable(loop);
    /* release: pairs with the acquire loads of embed_fd; a park (and so any waker that reads
     * SLEEP_EXTERNAL, sleep.c) comes after one, so external_fd is seen set. */
    atomic_store_explicit(&loop->embed_fd, p.fd, memory_order_release);
    return p.fd;
}

/* The fd, made on first demand (evloop_backend_fd, evloop_backend_timeout_ns); from then on
 * evloop_run_once parks the loop. Any thread. Returns it or -errno. */
static int embed_open(evloop *loop)
{
    /* acquire: pairs with the release store in make_fd(). */
    int fd = atomic_load_explicit(&loop->embed_fd, memory_order_acquire);
    if (fd >= 0)
        return fd;
    if (!loop->backend->pollable_fd)
        return -ENOTSUP;
    pthread_mutex_lock(&loop->embed_lock);
    fd = atomic_load_explicit(&loop->embed_fd, memory_order_relaxed);
    if (fd < 0)
        fd = make_fd(loop);
    pthread_mutex_unlock(&loop->embed_lock);
    return fd;
}

/* The fd is made on first demand: mutable state of a loop the caller passes as const. */
EVLOOP_API int evloop_backend_fd(const evloop *loop)
{
    return loop ? embed_open((evloop *)loop) : -EINVAL;
}

EVLOOP_API int64_t evloop_backend_timeout_ns(const evloop *loop)
{
    if (!loop)
        return -EINVAL;
    evloop *l = (evloop *)loop;
    int r = embed_open(l);
    if (r < 0)
        return r;
    if (!evloop__sleep_parked(&l->sleep) ||
        atomic_load_explicit(&l->stopping, memory_order_relaxed))
        return 0;
    return evloop__timer_timeout(l, evloop__clock_ns());
}

bool evloop__embed_in_use(evloop *loop)
{
    /* acquire: pairs with the release store in make_fd(). */
    return atomic_load_explicit(&loop->embed_fd, memory_order_acquire) >= 0;
}

/* A run starts (evloop_run, evloop_run_once): the park ends and the fd goes quiet, since
 * this run takes what made it readable. A waker that flipped the word before this and
 * writes the wake fd only after the read leaves it readable once more (the spurious
 * wake-up the header mentions). */
void evloop__embed_enter(evloop *loop)
{
    if (!evloop__embed_in_use(loop))
        return;
    evloop__sleep_finish(&loop->sleep);
    char buf[64];
    ssize_t n = read(loop->embed.drain_fd, buf, sizeof(buf)); /* EAGAIN: it was not readable */
    (void)n;
}

/* Before a park: wait()'s readiness goes into the fd while fds are registered (their
 * readiness must make the fd readable) and out when none is (a late wake of the backend
 * could leave it readable, which no wait would clear). Returns 0 or the backend's -errno;
 * then the fd is made readable, so the outer loop calls again and this is retried. */
int evloop__embed_watch(evloop *loop, bool poller)
{
    if (poller == loop->embed_watching)
        return 0;
    int r = loop->backend->pollable_watch(loop->backend_state, poller);
    if (r < 0) {
        set_readable(loop);
        return r;
    }
    loop->embed_watching = poller;
    return 0;
}

/* The loop has terminated: the fd stays readable (evloop_run_once says -ESHUTDOWN). */
void evloop__embed_terminated(evloop *loop)
{
    if (evloop__embed_in_use(loop))
        set_readable(loop);
}
