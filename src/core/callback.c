/* Running callbacks: every callback (task, timer, fd, op, signal, hook) is followed by the
 * microtasks it queued, before anything else runs. The tick and every subsystem that holds
 * callbacks call these; this file calls none of them (callback.h). */
#include "callback.h"

#define MICROTASK_BUDGET 1024 /* microtasks per drain point: a storm cannot starve the loop */

bool evloop__microtasks_pending(evloop *loop)
{
    return !evloop__taskq_is_empty(&loop->micro) || !evloop__ingress_is_empty(loop->remote_micro);
}

/* Runs a chunk of microtasks queued from other threads; false when none was ready. */
static bool run_remote_microtasks(evloop *loop, unsigned *budget)
{
    struct evloop_task batch[EVLOOP__DRAIN_CHUNK];
    size_t want = *budget < EVLOOP__DRAIN_CHUNK ? *budget : EVLOOP__DRAIN_CHUNK;
    size_t n = evloop__ingress_drain(loop->remote_micro, batch, want);
    for (size_t i = 0; i < n; i++)
        batch[i].cb(batch[i].arg);
    *budget -= (unsigned)n;
    return n > 0;
}

void evloop__drain_microtasks(evloop *loop)
{
    if (!evloop__microtasks_pending(loop))
        return;
    unsigned budget = MICROTASK_BUDGET;
    struct evloop_task t;
    while (budget > 0) {
        if (evloop__taskq_pop(&loop->micro, &t)) {
            t.cb(t.arg);
            budget--;
        } else if (!run_remote_microtasks(loop, &budget)) {
            break;
        }
    }
    evloop__count(&loop->stats.microtasks_run, MICROTASK_BUDGET - budget);
}

/* After every task, the microtasks it queued; microtasks from other threads arrive at
 * no particular moment, so they are looked for once per batch: that check reads shared
 * queue words, the per-task one only the loop's own queue. */
void evloop__run_tasks(evloop *loop, const struct evloop_task *tasks, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        tasks[i].cb(tasks[i].arg);
        if (!evloop__taskq_is_empty(&loop->micro))
            evloop__drain_microtasks(loop);
    }
    if (!evloop__ingress_is_empty(loop->remote_micro))
        evloop__drain_microtasks(loop);
    evloop__count(&loop->stats.tasks_run, n);
}
