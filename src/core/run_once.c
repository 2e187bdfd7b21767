/* evloop_run_once, a driver (design.md, "Embedding"): one iteration on the caller's thread,
 * the tick cut in two (tick.c), the same entry, shutdown rule and end as evloop_run (run.c),
 * and, with evloop_backend_fd in use, a park before it returns (embed_fd.c, tick.c). */
#include <limits.h>

#include "embed_fd.h"
#include "run.h"
#include "tick.h"
#include "work.h"

/* Callbacks run so far, as evloop_run_once counts them (hooks are not). Loop thread. */
static uint64_t callbacks_run(evloop *loop)
{
    const struct evloop__stats_counters *c = &loop->stats;
    return atomic_load_explicit(&c->tasks_run, memory_order_relaxed) +
           atomic_load_explicit(&c->microtasks_run, memory_order_relaxed) +
           atomic_load_explicit(&c->timers_fired, memory_order_relaxed) +
           atomic_load_explicit(&c->io_callbacks, memory_order_relaxed) +
           atomic_load_explicit(&c->signals_run, memory_order_relaxed);
}

/* With evloop_backend_fd in use, the loop parks: wait()'s readiness goes into that fd while
 * fds are registered, then the sleep protocol's park. Returns 0 or the -errno of changing
 * the fd; then it is readable and the loop not parked, so the outer loop calls again and
 * this is retried. */
static int park(evloop *loop)
{
    if (!evloop__embed_in_use(loop))
        return 0;
    bool poller = atomic_load_explicit(&loop->nfds, memory_order_relaxed) > 0;
    int r = evloop__embed_watch(loop, poller);
    if (r == 0)
        evloop__park(loop, poller);
    return r;
}

/* One iteration: what is ready runs (the first half of a tick); the wait is bounded by
 * timeout_ns, and skipped when something ran; when the wait ran nothing itself (it ended
 * for a task, a timer or a signal, not an fd), the first half runs again, so a call that
 * waited returns having run what ended the wait (libuv's UV_RUN_ONCE does the same for
 * timers). */
EVLOOP_API int evloop_run_once(evloop *loop, int64_t timeout_ns)
{
    if (!loop || timeout_ns < -1)
        return -EINVAL;
    int r = evloop__enter(loop);
    if (r < 0)
        return r;
    uint64_t before = callbacks_run(loop);
    evloop__tick_ready(loop);
    int64_t cap = callbacks_run(loop) != before ? 0 : timeout_ns;
    r = evloop__tick_wait(loop, cap);
    if (r >= 0 && cap != 0 && callbacks_run(loop) == before)
        evloop__tick_ready(loop);
    /* The pool threads' wakes that the callbacks since the wait deferred: the loop may not
     * run again until an item's done is ready. */
    evloop__work_flush(loop);
    uint64_t ran = callbacks_run(loop) - before;
    if (evloop__drained(loop)) {
        evloop__terminate(loop);
    } else {
        int parked = park(loop);
        if (r >= 0)
            r = parked;
        evloop__leave(loop);
    }
    if (r < 0)
        return r;
    return ran > INT_MAX ? INT_MAX : (int)ran;
}
