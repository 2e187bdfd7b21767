/* How work enters a loop: evloop_submit, evloop_submit_batch, evloop_submit_internal and
 * evloop_queue_microtask. From the loop thread, work goes into loop-thread queues (no
 * atomics, no wake); from any other thread it is pushed into an ingress queue, then
 * evloop__sleep_notify() wakes the loop only if it announced sleep (sleep.h). Stop closes
 * the way in (evloop__stop): a racing submit is either accepted and run or refused. */
#include "submit.h"

/* After a push accepted by q (pushed >= 0): wakes the loop if the push asked for it
 * (ingress.h) and the loop announced sleep; returns 0. A push that had to wake it tells
 * its queue: an arena lane whose pushes keep waking the loop switches to fenced pushes, so
 * the loop's sleeps need no membarrier. */
static inline int notify(evloop *loop, struct evloop__ingress *q, int pushed)
{
    if (pushed == EVLOOP__PUSHED_NOTIFY && evloop__sleep_notify(&loop->sleep))
        evloop__ingress_woke(q);
    return 0;
}

/* A refusal is final: once any push was refused, stopping is visible here (it is set
 * before the queues are closed, and close orders it before the refusal), so a later push
 * to another queue of the same loop is refused too. acquire: pairs with the seq_cst
 * exchange of stopping in evloop__stop(). */
static inline bool refused(evloop *loop)
{
    return atomic_load_explicit(&loop->stopping, memory_order_acquire);
}

/* One task from another thread: the path every submit takes, kept free of calls but the
 * push's own. */
static inline int push_one(evloop *loop, struct evloop__ingress *q, evloop_cb cb, void *arg)
{
    if (refused(loop))
        return -ESHUTDOWN;
    int r = evloop__ingress_push(q, cb, arg);
    return r < 0 ? r : notify(loop, q, r);
}

/* On the loop thread: into a loop-thread queue, no atomics, no wake. Out of line, so the
 * other thread's path saves no registers for the queue's growth. */
__attribute__((noinline)) static int push_local(evloop *loop, struct evloop__taskq *local,
                                                evloop_cb cb, void *arg)
{
    if (atomic_load_explicit(&loop->stopping, memory_order_relaxed))
        return -ESHUTDOWN;
    return evloop__taskq_push(local, cb, arg);
}

static inline int submit_to(evloop *loop, struct evloop__taskq *local, struct evloop__ingress *q,
                            evloop_cb cb, void *arg)
{
    if (!loop || !cb)
        return -EINVAL;
    if (evloop__on_loop_thread(loop))
        return push_local(loop, local, cb, arg);
    return push_one(loop, q, cb, arg);
}

EVLOOP_API int evloop_submit(evloop *loop, evloop_cb cb, void *arg)
{
    return submit_to(loop, loop ? &loop->local : NULL, loop ? loop->external : NULL, cb, arg);
}

/* On the loop thread: all or none into the local queue. */
static int push_local_batch(evloop *loop, const struct evloop_task *tasks, size_t n)
{
    if (atomic_load_explicit(&loop->stopping, memory_order_relaxed))
        return -ESHUTDOWN;
    uint32_t before = evloop__taskq_count(&loop->local);
    for (size_t i = 0; i < n; i++) {
        int r = evloop__taskq_push(&loop->local, tasks[i].cb, tasks[i].arg);
        if (r < 0) {
            evloop__taskq_truncate(&loop->local, before);
            return r;
        }
    }
    return 0;
}

EVLOOP_API int evloop_submit_batch(evloop *loop, const struct evloop_task *tasks, size_t n)
{
    if (!loop || (!tasks && n > 0))
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!tasks[i].cb)
            return -EINVAL;
    if (n == 0)
        return 0;
    if (evloop__on_loop_thread(loop))
        return push_local_batch(loop, tasks, n);
    if (refused(loop))
        return -ESHUTDOWN;
    int r = evloop__ingress_push_batch(loop->external, tasks, n);
    return r < 0 ? r : notify(loop, loop->external, r);
}

EVLOOP_API int evloop_submit_internal(evloop *loop, evloop_cb cb, void *arg)
{
    return submit_to(loop, loop ? &loop->local_internal : NULL, loop ? loop->internal : NULL, cb,
                     arg);
}

EVLOOP_API int evloop_queue_microtask(evloop *loop, evloop_cb cb, void *arg)
{
    if (!loop || !cb)
        return -EINVAL;
    /* On the loop thread a microtask is accepted until the loop has terminated: it is
     * spawned by work that was accepted, and shutdown runs all of that. */
    if (evloop__on_loop_thread(loop))
        return evloop__taskq_push(&loop->micro, cb, arg);
    return push_one(loop, loop->remote_micro, cb, arg);
}

void evloop__stop(evloop *loop)
{
    if (atomic_exchange(&loop->stopping, true))
        return;
    evloop__ingress_close(loop->external);
    evloop__ingress_close(loop->internal);
    evloop__ingress_close(loop->remote_micro);
    /* seq_cst: pairs with the load of closed in run_until_drained() (run.c). */
    atomic_store(&loop->closed, true);
    evloop__sleep_kick(&loop->sleep);
}
