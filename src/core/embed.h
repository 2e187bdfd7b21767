/* Internal state of the embedding API (issue 13), kept inside struct evloop (loop.h):
 * evloop_backend_fd's fds, hooks and the release notification (embed.c), and watched
 * signals (signal.c). Who touches what is said field by field. */
#ifndef EVLOOP_EMBED_H
#define EVLOOP_EMBED_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "evloop.h"

#define EVLOOP__SIGNAL_WORDS 2 /* pending bits for signal numbers 0..127 */

struct evloop__hook {
    evloop_cb cb; /* NULL: removed while hooks were running; dropped after that run */
    void *arg;
    unsigned when; /* enum evloop_hook */
};

struct evloop__embed {
    /* evloop_backend_fd: an epoll set holding an eventfd (the wake of SLEEP_EXTERNAL,
     * sleep.h) and, while fds are registered, the backend's pollable fd. Created once,
     * under lock, on first demand; epfd is published last. */
    pthread_mutex_t lock;
    _Atomic int epfd;    /* -1 until created */
    int efd;             /* the eventfd; its number is also sleep.external_fd */
    int backend_fd;      /* the backend's pollable fd, -1 if it has none */
    bool backend_in_set; /* loop thread: backend_fd is in epfd now */

    /* evloop_set_release_cb: any thread sets it, the terminating thread calls it. */
    _Atomic(evloop_cb) release;

    /* Hooks: the loop thread, or any thread while no thread runs the loop. */
    struct evloop__hook *hooks;
    uint32_t nhooks, hooks_cap;
    uint32_t hooks_of[2]; /* live hooks per enum evloop_hook */
    bool hooks_running;   /* removal only marks entries while a run is under way */

    /* Signals (signal.c). sig_pending: set by the handler on any thread, taken by the loop
     * thread; nsignals: watches of this loop (changed under signal.c's lock). */
    _Atomic uint64_t sig_pending[EVLOOP__SIGNAL_WORDS];
    _Atomic uint32_t nsignals;
    int sig_keepalive[2];         /* condvar waker only: a pipe, its read end registered while
                                     nsignals > 0 (signal.c) */
    _Atomic uint64_t signals_run; /* signal callbacks run; only the loop thread writes */
};

/* embed.c */
void evloop__embed_init(struct evloop__embed *e);
void evloop__embed_destroy(struct evloop__embed *e);
void evloop__embed_enter(evloop *loop);      /* a run starts: end the park, drain the fd */
int evloop__embed_park(evloop *loop);        /* evloop_run_once returns: arm the fd */
void evloop__embed_terminated(evloop *loop); /* the fd stays readable from now on */
void evloop__run_hooks(evloop *loop, unsigned when);
void evloop__release_hooks(evloop *loop);
void evloop__release_fd_args(evloop *loop); /* before evloop__release_fds (io.c) */

static inline bool evloop__hooks_any(const struct evloop__embed *e, unsigned when)
{
    return e->hooks_of[when] != 0;
}

/* signal.c */
void evloop__run_signals(evloop *loop);
void evloop__release_signals(evloop *loop);

/* Any thread; a hint the loop thread acts on (the handler also kicks the sleep word). */
static inline bool evloop__signals_pending(struct evloop__embed *e)
{
    /* relaxed: the re-check after announce/park orders it (heavy barrier), as for queues. */
    for (int i = 0; i < EVLOOP__SIGNAL_WORDS; i++)
        if (atomic_load_explicit(&e->sig_pending[i], memory_order_relaxed))
            return true;
    return false;
}

static inline bool evloop__signals_watched(struct evloop__embed *e)
{
    return atomic_load_explicit(&e->nsignals, memory_order_relaxed) != 0;
}

#endif
