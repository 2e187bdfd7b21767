/* The bottom layer of the core: the loop's state and counters, data and accessors with no
 * behaviour (docs/design.md, "Layers inside the core"). Every file above includes it. Fields
 * are grouped by who touches them: producers (any thread), each subsystem's table (under its
 * mutex; the file that owns it is named at the group), and the loop thread alone. */
#ifndef EVLOOP_STATE_H
#define EVLOOP_STATE_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "common.h"
#include "evloop.h"
#include "ingress.h"
#include "sleep.h"
#include "spin.h"
#include "state_ops.h"
#include "taskq.h"

#define EVLOOP__IO_EVENTS_MAX 64
#define EVLOOP__DRAIN_CHUNK 64
#define EVLOOP__BUDGET_MIN 64   /* the adaptive batch budget's range (tick.c); a */
#define EVLOOP__BUDGET_MAX 4096 /* profile's budget is fitted into it (lifecycle.c) */
#define EVLOOP__SIGNAL_WORDS 2  /* pending bits for signal numbers 0..127 */

struct evloop__work_pool; /* work.c */

struct evloop__timer {
    uint64_t deadline, interval, order;
    evloop_cb cb;
    void *arg;
    uint32_t gen;      /* id = gen << 32 | slot index */
    uint32_t heap_idx; /* position in the heap, or UINT32_MAX when the slot is free */
    uint32_t next_free;
};

struct evloop__fd {
    evloop_io_cb cb;
    void *arg;
    uint32_t gen; /* bumped on add and remove; stale readiness carries an old gen */
    uint32_t events;
    bool active;
};

struct evloop__hook {
    evloop_cb cb; /* NULL: removed while hooks were running; dropped after that run */
    void *arg;
    unsigned when; /* enum evloop_hook */
};

struct evloop__stats_counters {
    _Atomic uint64_t tasks_run, microtasks_run, timers_fired, io_callbacks, ticks;
    _Atomic uint64_t futex_sleeps, poller_sleeps, spin_hits, spin_misses, spin_preemptions;
    _Atomic uint64_t signals_run; /* signal callbacks run (not in evloop_stats) */
};

struct evloop {
    /* The sleep word and the epoch (sleep.h): read by producers after every publication. */
    struct evloop__sleep sleep;

    /* Read by producers on every submit. */
    alignas(EVLOOP_CACHELINE) _Atomic bool stopping; /* set first by evloop_stop() */
    _Atomic bool closed;     /* set by evloop_stop() once every ingress queue is closed */
    _Atomic uintptr_t owner; /* the thread inside evloop_run, 0 when none */
    struct evloop__ingress *external, *internal, *remote_micro;
    const struct evloop__backend *backend;
    void *backend_state;
    unsigned backend_caps;
    _Atomic uint32_t nfds; /* registered fds; the loop sleeps in the poller while > 0 */
    const char *fence_why; /* "" or why producers fence (evloop_stats) */

    /* Timers (timer.c): a binary min-heap of slot indices over a slab of timers. */
    alignas(EVLOOP_CACHELINE) pthread_mutex_t timer_lock;
    struct evloop__timer *timers; /* under timer_lock */
    uint32_t *heap;               /* under timer_lock */
    uint32_t heap_len, timers_cap, free_timer;
    uint64_t timer_order;
    _Atomic uint64_t next_deadline; /* heap top's deadline, UINT64_MAX when empty */

    /* Fds (io.c): a table indexed by fd. */
    alignas(EVLOOP_CACHELINE) pthread_mutex_t io_lock;
    struct evloop__fd *fds; /* under io_lock */
    int fds_cap;
    _Atomic int dispatch_fd; /* fd whose callback the loop runs now, -1 when none */
    /* Installed by the lifecycle (evloop_new): evloop_io_add asks it, under io_lock, whether
     * a subsystem above io.c holds fd (ops.c: -EBUSY while operations are pending on it). */
    int (*fd_claim)(evloop *loop, int fd);
    struct evloop__ops ops; /* completion operations (ops.c, state_ops.h): under io_lock */

    /* The loop thread's own state. */
    alignas(EVLOOP_CACHELINE) _Atomic int phase; /* AWAKE, RUNNING, SLEEPING, TERMINATED */
    _Atomic bool running;
    struct evloop__taskq local, local_internal, micro;
    uint64_t now;
    _Atomic unsigned budget; /* external tasks per tick now; read by evloop_stats */
    bool budget_adaptive;
    struct evloop__spin spin; /* the spin before a sleep (spin.h); evloop_stats reads it */
    bool auto_exit;
    bool multi_cpu;             /* this thread may run on more than one CPU */
    uint64_t last_fence;        /* clock ns of the last heavy barrier the tick asked for */
    bool profile_loaded;        /* evloop_new started from a profile (for evloop_stats) */
    struct evloop__stats_counters stats;
    char fallback[128];       /* why auto did not get its first choice (backend.c) */
    char backend_reason[192]; /* why this backend, and which implementation (backend.c) */

    /* evloop_backend_fd (embed_fd.c): made by the backend (backend.h, pollable_fd) once,
     * under embed_lock, on first demand; embed_fd is published last. */
    pthread_mutex_t embed_lock;
    _Atomic int embed_fd;          /* the fd, -1 until made */
    struct evloop__pollable embed; /* what the backend made: fds owned by the backend */
    bool embed_watching;           /* loop thread: wait()'s readiness is in the fd now */

    /* The work pool (work.c): made by the first evloop_work_submit or _configure (the loop
     * thread, or the one thread allowed while none runs the loop), published with a release
     * store for evloop_work_stats; NULL until then. */
    _Atomic(struct evloop__work_pool *) work;

    /* The release notification (release.c): any thread sets it, the terminating thread
     * calls it. */
    _Atomic(evloop_cb) release;

    /* Hooks (hooks.c): the loop thread, or any thread while no thread runs the loop. */
    struct evloop__hook *hooks;
    uint32_t nhooks, hooks_cap;
    uint32_t hooks_of[2]; /* live hooks per enum evloop_hook */
    bool hooks_running;   /* removal only marks entries while a run is under way */

    /* Signals (signals.c). sig_pending: set by the handler on any thread, taken by the loop
     * thread; nsignals: watches of this loop (changed under signals.c's lock). */
    _Atomic uint64_t sig_pending[EVLOOP__SIGNAL_WORDS];
    _Atomic uint32_t nsignals;
    int sig_keepalive[2]; /* condvar waker only: a pipe, its read end registered while
                             nsignals > 0 (signals.c) */
};

static inline void evloop__count(_Atomic uint64_t *counter, uint64_t n)
{
    /* Only the loop thread writes these counters; relaxed: statistics only. */
    atomic_store_explicit(counter, atomic_load_explicit(counter, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

/* The calling thread's id for loop->owner: the address of a thread-local, unique among live
 * threads as pthread_self() is, without a call into libc on every submit. */
extern _Thread_local char evloop__thread_mark EVLOOP_TLS_FAST;

static inline uintptr_t evloop__self(void)
{
    return (uintptr_t)&evloop__thread_mark;
}

/* Any thread: whether the calling thread runs the loop now. */
static inline bool evloop__on_loop_thread(const evloop *loop)
{
    /* relaxed: only the loop thread itself can find its own id here. */
    return atomic_load_explicit(&loop->owner, memory_order_relaxed) == evloop__self();
}

static inline bool evloop__has_fds(const evloop *loop)
{
    return atomic_load_explicit(&loop->nfds, memory_order_relaxed) > 0;
}

static inline bool evloop__hooks_any(const evloop *loop, unsigned when)
{
    return loop->hooks_of[when] != 0;
}

/* Any thread; a hint the loop thread acts on (the handler also kicks the sleep word). */
static inline bool evloop__signals_pending(evloop *loop)
{
    /* relaxed: the re-check after announce/park orders it (heavy barrier), as for queues. */
    for (int i = 0; i < EVLOOP__SIGNAL_WORDS; i++)
        if (atomic_load_explicit(&loop->sig_pending[i], memory_order_relaxed))
            return true;
    return false;
}

static inline bool evloop__signals_watched(evloop *loop)
{
    return atomic_load_explicit(&loop->nsignals, memory_order_relaxed) != 0;
}

#endif
