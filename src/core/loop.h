/* The loop object shared by the core's files (loop.c, tick.c, submit.c, timer.c, io.c).
 * Fields are grouped by who touches them: producers (any thread), the timer and fd
 * tables (under their mutexes), and the loop thread alone. */
#ifndef EVLOOP_LOOP_H
#define EVLOOP_LOOP_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "common.h"
#include "embed.h"
#include "evloop.h"
#include "ingress.h"
#include "ops.h"
#include "sleep.h"
#include "taskq.h"

#define EVLOOP__IO_EVENTS_MAX 64
#define EVLOOP__DRAIN_CHUNK 64
#define EVLOOP__BUDGET_MIN 64   /* the adaptive batch budget's range (tick.c); a */
#define EVLOOP__BUDGET_MAX 4096 /* profile's budget is fitted into it (loop.c) */

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

struct evloop__stats_counters {
    _Atomic uint64_t tasks_run, microtasks_run, timers_fired, io_callbacks, ticks;
    _Atomic uint64_t futex_sleeps, poller_sleeps, spin_hits, spin_misses, spin_preemptions;
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

    /* Timers: a binary min-heap of slot indices over a slab of timers. */
    alignas(EVLOOP_CACHELINE) pthread_mutex_t timer_lock;
    struct evloop__timer *timers; /* under timer_lock */
    uint32_t *heap;               /* under timer_lock */
    uint32_t heap_len, timers_cap, free_timer;
    uint64_t timer_order;
    _Atomic uint64_t next_deadline; /* heap top's deadline, UINT64_MAX when empty */

    /* Fds: a table indexed by fd. */
    alignas(EVLOOP_CACHELINE) pthread_mutex_t io_lock;
    struct evloop__fd *fds; /* under io_lock */
    int fds_cap;
    _Atomic int dispatch_fd; /* fd whose callback the loop runs now, -1 when none */
    struct evloop__ops ops;  /* completion operations (ops.h): its table under io_lock */

    /* The loop thread's own state. */
    alignas(EVLOOP_CACHELINE) _Atomic int phase; /* AWAKE, RUNNING, SLEEPING, TERMINATED */
    _Atomic bool running;
    struct evloop__taskq local, local_internal, micro;
    uint64_t now;
    _Atomic unsigned budget; /* external tasks per tick now; read by evloop_stats */
    bool budget_adaptive;
    _Atomic int64_t spin_window; /* ns; read by evloop_stats */
    int64_t spin_max;            /* ns; the adaptive window never grows past it */
    bool spin_adaptive;
    bool auto_exit;
    bool multi_cpu;              /* this thread may run on more than one CPU */
    uint64_t spin_paused_until;  /* clock ns; no spinning before it (the CPU was taken away) */
    uint64_t spin_pause_ns;      /* length of the next such pause; doubles up to a second */
    uint64_t last_fence;         /* clock ns of the last heavy barrier the tick asked for */
    bool profile_loaded; /* evloop_new started from a profile (for evloop_stats) */
    struct evloop__stats_counters stats;
    char fallback[128];       /* why auto did not get its first choice (backend.c) */
    char backend_reason[192]; /* why this backend, and which implementation (backend.c) */

    /* Embedding, hooks, the release notification and signals (embed.h, issue 13). */
    struct evloop__embed embed;
};

/* embed.c: the release notification. Whatever drops a callback argument without running
 * it (timers, fds, signals and hooks at termination; completion ops dropped by stop or
 * free) calls this once per argument, on the loop thread or the thread freeing the loop;
 * it calls the function set by evloop_set_release_cb(), if any. Never under a lock the
 * release function could need (it may call any evloop_* but evloop_free). */
void evloop__released(evloop *loop, void *arg);

/* loop.c: entering and leaving a run (evloop_run, evloop_run_once) */
int evloop__enter(evloop *loop);
void evloop__leave(evloop *loop);
bool evloop__drained(evloop *loop);
void evloop__terminate(evloop *loop);

/* submit.c */
bool evloop__on_loop_thread(const evloop *loop);

/* tick.c. evloop__tick = evloop__tick_ready (timers, signals, queues) then
 * evloop__tick_wait (hooks, poll or sleep at most max_wait_ns, -1: no bound, fd callbacks);
 * evloop_run_once calls the halves itself, and evloop__park before it returns. */
int evloop__tick(evloop *loop);
void evloop__tick_ready(evloop *loop);
int evloop__tick_wait(evloop *loop, int64_t max_wait_ns);
void evloop__park(evloop *loop, bool poller);
bool evloop__has_work(evloop *loop);

/* callback.c: run callbacks, each followed by the microtasks it queued */
void evloop__run_tasks(evloop *loop, const struct evloop__task *tasks, size_t n);
void evloop__drain_microtasks(evloop *loop);
bool evloop__microtasks_pending(evloop *loop);

/* timer.c */
void evloop__run_timers(evloop *loop);
int64_t evloop__timer_timeout(evloop *loop, uint64_t now);
bool evloop__has_timers(evloop *loop);
void evloop__release_timers(evloop *loop);
void evloop__destroy_timers(evloop *loop);

/* io.c */
int evloop__poll_io(evloop *loop, int64_t timeout_ns);
int evloop__wait_io(evloop *loop, int64_t timeout_ns, struct evloop__io_event *ev);
void evloop__dispatch_io(evloop *loop, const struct evloop__io_event *ev, int n);
void evloop__release_fds(evloop *loop);

static inline void evloop__count(_Atomic uint64_t *counter, uint64_t n)
{
    /* Only the loop thread writes these counters; relaxed: statistics only. */
    atomic_store_explicit(counter, atomic_load_explicit(counter, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

#endif
