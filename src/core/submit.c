/* How work enters a loop: evloop_submit, evloop_submit_internal and
 * evloop_queue_microtask, and the producer half of the wake protocol (design.md).
 * From the loop thread, work goes into loop-thread queues (no atomics, no wake); from
 * any other thread it is pushed into an ingress queue, then the loop is woken only if
 * it announced sleep, and only by the producer that flips the sleep word. */
#include <pthread.h>

#include "loop.h"

bool evloop__on_loop_thread(const evloop *loop)
{
    /* relaxed: only the loop thread itself can find its own id here. */
    return atomic_load_explicit(&loop->owner, memory_order_relaxed) == (uintptr_t)pthread_self();
}

void evloop__wake_loop(evloop *loop)
{
    /* seq_cst: pairs with the store of a SLEEP_* value in prepare_sleep() (tick.c); the
     * caller's push or change before this is seq_cst too. The cheap load first keeps a
     * busy loop's producers free of read-modify-writes on the word. */
    if (atomic_load(&loop->sleep_word) == EVLOOP__AWAKE)
        return;
    uint32_t was = atomic_exchange(&loop->sleep_word, EVLOOP__AWAKE);
    if (was == EVLOOP__SLEEP_WORD) {
        atomic_fetch_add_explicit(&loop->futex_wakes, 1, memory_order_relaxed);
        evloop__waker_wake(loop->waker, &loop->sleep_word);
    } else if (was == EVLOOP__SLEEP_POLLER) {
        atomic_fetch_add_explicit(&loop->poller_wakes, 1, memory_order_relaxed);
        loop->backend->wake(loop->backend_state);
    }
}

void evloop__kick(evloop *loop)
{
    /* seq_cst: pairs with the re-read of epoch in prepare_sleep() (tick.c). */
    atomic_fetch_add(&loop->epoch, 1);
    evloop__wake_loop(loop);
}

/* A refusal is final: once any push was refused, stopping is visible here (it is set
 * before the queues are closed, and a refused push acquires the close), so a later
 * push to another queue of the same loop is refused too. */
static int push_and_wake(evloop *loop, struct evloop__ingress *q, evloop_cb cb, void *arg)
{
    /* acquire: pairs with the seq_cst exchange of stopping in evloop_stop(). */
    if (atomic_load_explicit(&loop->stopping, memory_order_acquire))
        return -ESHUTDOWN;
    int r = evloop__ingress_push(q, cb, arg);
    if (r == 0)
        evloop__wake_loop(loop);
    return r;
}

static int submit_to(evloop *loop, struct evloop__taskq *local, struct evloop__ingress *q,
                     evloop_cb cb, void *arg)
{
    if (!loop || !cb)
        return -EINVAL;
    if (evloop__on_loop_thread(loop)) {
        if (atomic_load_explicit(&loop->stopping, memory_order_relaxed))
            return -ESHUTDOWN;
        return evloop__taskq_push(local, cb, arg);
    }
    return push_and_wake(loop, q, cb, arg);
}

EVLOOP_API int evloop_submit(evloop *loop, evloop_cb cb, void *arg)
{
    return submit_to(loop, loop ? &loop->local : NULL, loop ? loop->external : NULL, cb, arg);
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
    return push_and_wake(loop, loop->remote_micro, cb, arg);
}
