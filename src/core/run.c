/* evloop_run, a driver: ticks (tick.c) until the loop is stopped and everything accepted has
 * run, then releases what is still registered. Shutdown (design.md): stop closes the ingress
 * queues (submit.c), so a racing submit is either accepted and run or refused; "no work" is
 * final only once every queue is closed. evloop_run_once (run_once.c) enters, leaves and
 * ends a run through the same calls. */
#include <poll.h>

#include "embed_fd.h"
#include "hooks.h"
#include "io.h"
#include "ops.h"
#include "run.h"
#include "signals.h"
#include "submit.h"
#include "tick.h"
#include "timer.h"
#include "work.h"

static bool nothing_left(evloop *loop)
{
    /* A watched signal keeps an auto_exit loop running, as a timer or an fd does. */
    return !evloop__has_work(loop) && !evloop__has_timers(loop) &&
           atomic_load_explicit(&loop->nfds, memory_order_relaxed) == 0 &&
           !evloop__signals_watched(loop) && !evloop__work_busy(loop);
}

/* After a tick: a stopping loop ends its pending completion operations (-ECANCELED, their
 * callbacks run). Returns whether the loop is closed (evloop_stop has closed every queue).
 * closed is read first: stop() sets stopping before closed, so a loop that sees closed sees
 * stopping too, and cannot end its run on a stop that came after its read of stopping, with
 * ops linked by the last tick's callbacks never ended (stress_ops saw it: 3 callbacks lost
 * in about one stop of 20,000). */
static bool stop_seen(evloop *loop)
{
    /* seq_cst: pairs with the store of closed in evloop_stop(). */
    bool closed = atomic_load(&loop->closed);
    if (atomic_load_explicit(&loop->stopping, memory_order_relaxed))
        evloop__ops_stop(loop);
    return closed;
}

static int run_until_drained(evloop *loop)
{
    int err = 0;
    for (;;) {
        int r = evloop__tick(loop);
        if (r < 0 && err == 0) {
            err = r; /* a poller failure: shut down gracefully, then report it */
            evloop__stop(loop);
        }
        /* Only once every queue is closed is "no work" final: until then a producer
         * may still be accepted by a queue that stop() has not reached yet. */
        bool closed = stop_seen(loop);
        if (closed && !evloop__has_work(loop) && !evloop__work_busy(loop))
            return err;
        if (loop->auto_exit && nothing_left(loop))
            evloop__stop(loop);
    }
}

int evloop__enter(evloop *loop)
{
    if (atomic_exchange(&loop->running, true))
        return -EBUSY;
    if (atomic_load(&loop->phase) == EVLOOP_TERMINATED) {
        atomic_store(&loop->running, false);
        return -ESHUTDOWN;
    }
    atomic_store_explicit(&loop->owner, evloop__self(), memory_order_relaxed);
#if EVLOOP__TSAN
    /* ThreadSanitizer makes a thread's signal state on the thread's first blocking call,
     * and a handler that runs meanwhile arms its signal in a second copy that the first then
     * overwrites: the signal is lost (seen in tests; tournament/results/design-figures.md).
     * A blocking call with nothing to wait for makes it here, before the loop reads as
     * running, so no delivery to this thread while it runs the loop can meet that race. */
    poll(NULL, 0, 0);
#endif
    atomic_store(&loop->phase, EVLOOP_RUNNING);
    evloop__embed_enter(loop);
    return 0;
}

void evloop__leave(evloop *loop)
{
    atomic_store_explicit(&loop->owner, 0, memory_order_relaxed);
    atomic_store(&loop->phase, EVLOOP_AWAKE);
    atomic_store(&loop->running, false);
}

/* evloop_run_once after its iteration, as run_until_drained() after each tick. A step added
 * to run_until_drained() after the tick belongs here too. */
bool evloop__drained(evloop *loop)
{
    if (loop->auto_exit && nothing_left(loop))
        evloop__stop(loop);
    /* as in run_until_drained() */
    return stop_seen(loop) && !evloop__has_work(loop) && !evloop__work_busy(loop);
}

/* Each argument released goes through the release notification (release.c). On the loop
 * thread. */
void evloop__terminate(evloop *loop)
{
    evloop__release_signals(loop);
    evloop__release_timers(loop);
    evloop__release_fds(loop);
    evloop__release_hooks(loop);
    evloop__embed_terminated(loop);
    atomic_store_explicit(&loop->owner, 0, memory_order_relaxed);
    atomic_store(&loop->phase, EVLOOP_TERMINATED);
    atomic_store(&loop->running, false);
}

EVLOOP_API int evloop_run(evloop *loop)
{
    if (!loop)
        return -EINVAL;
    int r = evloop__enter(loop);
    if (r < 0)
        return r;
    int err = run_until_drained(loop);
    evloop__terminate(loop);
    return err;
}
