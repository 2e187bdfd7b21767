/* The work pool (work.c), a subsystem: evloop_work_submit's items, the pool threads that run
 * them, and the way their done callbacks come back to the loop thread (an ingress queue of
 * its own, drained by the tick). The drivers call these; docs/design.md, "Work pool". */
#ifndef EVLOOP_WORK_H
#define EVLOOP_WORK_H

#include <stdbool.h>
#include <stdint.h>

#include "state.h"

struct evloop__work_pool;

/* Loop thread, the tick's step: runs the done callbacks that are ready (completions from
 * pool threads, cancelled items), then moves items waiting on the loop thread into the
 * queue. */
void evloop__work_run(evloop *loop);

/* Loop thread, before it polls or sleeps and before evloop_run_once returns: wakes pool
 * threads for the items published since the last call whose wake was deferred (the pool
 * shares the loop's one CPU). Nothing accepted is left unwoken while the loop sleeps. */
void evloop__work_flush(evloop *loop);

/* Loop thread, once the loop is stopping: every item no pool thread has started is
 * cancelled (its done runs with -ECANCELED at the next evloop__work_run). Idempotent. */
void evloop__work_stop(evloop *loop);

/* lifecycle.c, first in destroy: ends and joins the pool threads, frees the pool. */
void evloop__work_destroy(evloop *loop);

/* Loop thread: whether a spin of the loop leaves the pool's busy threads their CPUs
 * (spin.h, evloop__spin_room); true without a pool. */
bool evloop__work_leaves_room(evloop *loop);

/* Loop thread, about to sleep with timeout_ns (-1: none): the timeout to sleep with. While
 * the pool threads with work fill the CPUs (evloop__work_leaves_room false) and enough
 * items are queued to keep them busy, the loop dozes: it sleeps at most as long as half the
 * queued items take at the recent pace of replies (never over 200 us, never under 20 us), and
 * no reply wakes it meanwhile; anything else still does. Where it would not doze, or the
 * timeout comes first, returns timeout_ns unchanged. */
int64_t evloop__work_doze(evloop *loop, int64_t timeout_ns);

/* Loop thread, after that sleep and before any other announce: replies wake it again. */
void evloop__work_doze_end(evloop *loop);

bool evloop__work_ready_slow(struct evloop__work_pool *p);
uint64_t evloop__work_pending_slow(const struct evloop__work_pool *p);
struct evloop__ingress *evloop__work_queue_slow(struct evloop__work_pool *p);

/* Loop thread: a done callback is ready to run (a completion arrived, an item was
 * cancelled). Part of "has work": the loop does not sleep while it is true. */
static inline bool evloop__work_ready(evloop *loop)
{
    /* relaxed: the loop thread made the pool, or was handed the loop after it was made. */
    struct evloop__work_pool *p = atomic_load_explicit(&loop->work, memory_order_relaxed);
    return p && evloop__work_ready_slow(p);
}

/* Loop thread: accepted items whose done has not run. A stopping loop, and an auto_exit
 * loop, keeps running while there are any. */
static inline bool evloop__work_busy(evloop *loop)
{
    struct evloop__work_pool *p = atomic_load_explicit(&loop->work, memory_order_relaxed);
    return p && evloop__work_pending_slow(p) > 0;
}

/* The completion queue (an ingress queue: pool threads push, the loop drains), for the
 * sleep protocol's heavy-barrier and settle calls (tick.c); NULL before the pool exists. */
static inline struct evloop__ingress *evloop__work_queue(evloop *loop)
{
    struct evloop__work_pool *p = atomic_load_explicit(&loop->work, memory_order_relaxed);
    return p ? evloop__work_queue_slow(p) : NULL;
}

#endif
