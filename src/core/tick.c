/* One iteration of the loop, in design.md's order: update the clock, run expired
 * timers, run the loop-thread queues and internal tasks, drain the external ingress
 * within the batch budget, then poll or sleep (spinning first) and run fd callbacks.
 * The microtask queue is drained after every callback (callback.c). prepare_sleep()
 * decides when to sleep and re-checks every queue between the announce and the block of
 * the sleep protocol (sleep.h). Watched signals run after the timers, hooks around the
 * wait; evloop_run_once (run_once.c) runs the two halves of a tick itself
 * (evloop__tick_ready, evloop__tick_wait, with a bound on the wait) and parks the loop with
 * evloop__park() between its calls. A driver: it calls the subsystems, which never call it. */
#include "callback.h"
#include "hooks.h"
#include "signals.h"
#include "spin.h"
#include "tick.h"
#include "tick_poll.h"
#include "timer.h"
#include "work.h"

#define FENCE_INTERVAL_NS 1000000 /* heavy barriers a busy loop makes for idle lanes */
#define CHASE_PAUSES 256 /* pause rounds the loop lets producers get ahead at most */
#define CHASE_LOOK 64     /* pause rounds between two looks at the backlog */
#define STOP_WAIT_NS 1000000 /* a stopping loop's wait for the pool is re-checked this often */

/* Runs what is in a loop-thread queue now; what those tasks submit waits a tick. */
static void run_taskq(evloop *loop, struct evloop__taskq *q)
{
    struct evloop_task t;
    for (uint32_t n = evloop__taskq_count(q); n > 0 && evloop__taskq_pop(q, &t); n--)
        evloop__run_tasks(loop, &t, 1);
}

static void run_internal(evloop *loop)
{
    run_taskq(loop, &loop->local_internal);
    struct evloop_task batch[EVLOOP__DRAIN_CHUNK];
    size_t n;
    while ((n = evloop__ingress_drain(loop->internal, batch, EVLOOP__DRAIN_CHUNK)) > 0)
        evloop__run_tasks(loop, batch, n);
}

static void run_local(evloop *loop)
{
    evloop__drain_microtasks(loop);
    run_internal(loop);
    evloop__work_run(loop);
    run_taskq(loop, &loop->local);
}

static bool internal_pending(evloop *loop)
{
    return !evloop__taskq_is_empty(&loop->local_internal) ||
           !evloop__ingress_is_empty(loop->internal);
}

static void adapt_budget(evloop *loop, unsigned ran, bool more_left)
{
    if (!loop->budget_adaptive)
        return;
    /* relaxed: only the loop thread writes the budget; evloop_stats reads it. */
    unsigned budget = atomic_load_explicit(&loop->budget, memory_order_relaxed);
    if (more_left && budget < EVLOOP__BUDGET_MAX)
        budget *= 2;
    else if (!more_left && ran < budget / 4 && budget > EVLOOP__BUDGET_MIN)
        budget /= 2;
    atomic_store_explicit(&loop->budget, budget, memory_order_relaxed);
}

/* The drain caught up with producers that are still pushing. Taking each task as it
 * lands would pull every cache line they write away from them while they write it: let
 * them get a batch ahead first, for at most CHASE_PAUSES pause rounds (a few us). Each look
 * at the backlog pulls such a line too, and a producer pays for it at its next write (a
 * chunk producer at once, its mutex's locked instructions waiting for the store): look
 * seldom (tournament/results/tuning-log.md, row 9). */
static void wait_for_batch(evloop *loop)
{
    for (int i = 0; i < CHASE_PAUSES; i += CHASE_LOOK) {
        for (int j = 0; j < CHASE_LOOK; j++)
            evloop__cpu_relax();
        if (evloop__ingress_backlog(loop->external) >= EVLOOP__DRAIN_CHUNK)
            return;
    }
}

/* The loop's heavy barrier has just run: lanes kept on probation can be settled. */
static void ingress_fenced(evloop *loop)
{
    evloop__ingress_fenced(loop->external);
    evloop__ingress_fenced(loop->internal);
    evloop__ingress_fenced(loop->remote_micro);
    struct evloop__ingress *replies = evloop__work_queue(loop);
    if (replies)
        evloop__ingress_fenced(replies);
}

/* A busy loop that never sleeps still settles idle lanes, with a heavy barrier at most
 * once per FENCE_INTERVAL_NS when a queue asks for one (ingress.h). */
static void fence_if_wanted(evloop *loop)
{
    if (!evloop__ingress_wants_fence(loop->external) || loop->now - loop->last_fence < FENCE_INTERVAL_NS)
        return;
    loop->last_fence = loop->now;
    evloop__sleep_heavy(&loop->sleep);
    ingress_fenced(loop);
}

static void drain_ingress(evloop *loop)
{
    struct evloop_task batch[EVLOOP__DRAIN_CHUNK];
    unsigned done = 0, budget = atomic_load_explicit(&loop->budget, memory_order_relaxed);
    bool waited = false;
    while (done < budget) {
        unsigned want = budget - done < EVLOOP__DRAIN_CHUNK ? budget - done : EVLOOP__DRAIN_CHUNK;
        size_t n = evloop__ingress_drain(loop->external, batch, want);
        if (n == 0)
            break;
        evloop__run_tasks(loop, batch, n);
        done += (unsigned)n;
        /* Internal tasks that arrived meanwhile go before the next chunk of externals. */
        if (internal_pending(loop))
            run_internal(loop);
        if (n < want) {
            if (waited || evloop__ingress_is_empty(loop->external))
                break;
            wait_for_batch(loop);
            waited = true;
        }
    }
    adapt_budget(loop, done, done == budget && !evloop__ingress_is_empty(loop->external));
    fence_if_wanted(loop);
}

bool evloop__has_work(evloop *loop)
{
    return !evloop__taskq_is_empty(&loop->local) ||
           !evloop__taskq_is_empty(&loop->local_internal) || evloop__microtasks_pending(loop) ||
           !evloop__ingress_is_empty(loop->internal) || !evloop__ingress_is_empty(loop->external) ||
           evloop__work_ready(loop);
}

/* A look at the fds from inside the spin: a zero-timeout wait of the backend, whose reports
 * are dispatched at once. True when it found any (then the spin is a hit). */
static bool spin_poll_io(evloop *loop)
{
    struct evloop__io_event ev[EVLOOP__IO_EVENTS_MAX];
    int n = evloop__wait_io(loop, 0, ev);
    if (n <= 0)
        return false; /* an error is met again, and returned, by the wait after the spin */
    evloop__dispatch_io(loop, ev, n);
    return true;
}

/* Spins up to the spin window (never past timeout_ns) watching the queues and, while fds
 * are registered, their readiness (a zero-timeout wait at every look at the clock, every
 * few us): a server's next request then lands in the spin, not after a sleep and a wake.
 * Returns true when something arrived: then neither side made a wake syscall. The policy
 * (spin.h) decides whether and how long; the pool's busy threads count against the CPUs. */
static bool spin_for_work(evloop *loop, int64_t timeout_ns, uint32_t epoch)
{
    if (!loop->multi_cpu || !evloop__work_leaves_room(loop))
        return false;
    uint64_t last = evloop__clock_ns();
    int64_t window = evloop__spin_begin(&loop->spin, last, timeout_ns);
    if (window <= 0)
        return false;
    uint64_t end = last + (uint64_t)window;
    for (unsigned i = 1;; i++) {
        bool io_found = (i & 31) == 0 && atomic_load_explicit(&loop->nfds, memory_order_relaxed) > 0 &&
                        spin_poll_io(loop);
        if (io_found || evloop__has_work(loop) ||
            atomic_load_explicit(&loop->stopping, memory_order_relaxed) ||
            evloop__sleep_epoch(&loop->sleep) != epoch) {
            evloop__count(&loop->stats.spin_hits, 1);
            evloop__spin_end(&loop->spin, true);
            return true;
        }
        evloop__cpu_relax();
        if ((i & 31) == 0) {
            uint64_t now = evloop__clock_ns();
            if (evloop__spin_lost_cpu(&loop->spin, last, now)) {
                evloop__count(&loop->stats.spin_preemptions, 1);
                return false;
            }
            last = now;
            if (now >= end)
                break;
            if (!evloop__work_leaves_room(loop))
                return false; /* the pool's threads fill the CPUs now: sleep, no verdict */
        }
    }
    evloop__count(&loop->stats.spin_misses, 1);
    evloop__spin_end(&loop->spin, false);
    return false;
}

/* Whether a push published with only the light barrier could go unseen by the re-check
 * after a sleep announce without the heavy barrier (sleep.c, ingress.h). */
static bool needs_heavy(void *arg)
{
    evloop *loop = arg;
    struct evloop__ingress *replies = evloop__work_queue(loop);
    return evloop__ingress_needs_heavy(loop->external) ||
           evloop__ingress_needs_heavy(loop->internal) ||
           evloop__ingress_needs_heavy(loop->remote_micro) ||
           (replies && evloop__ingress_needs_heavy(replies));
}

static bool sleep_cancelled(evloop *loop, uint32_t epoch, bool poller)
{
    return evloop__has_work(loop) || evloop__signals_pending(loop) ||
           atomic_load_explicit(&loop->stopping, memory_order_relaxed) ||
           evloop__sleep_epoch(&loop->sleep) != epoch ||
           (atomic_load_explicit(&loop->nfds, memory_order_relaxed) > 0) != poller;
}

/* Announces sleep, re-checks, and blocks until woken, a timer is due or an fd is ready:
 * the loop half of the sleep protocol (sleep.h). The re-check runs after the announce's
 * heavy barrier, so it sees whatever a producer that read AWAKE had published. */
static int prepare_sleep(evloop *loop, int64_t timeout_ns, uint32_t epoch)
{
    bool poller = atomic_load_explicit(&loop->nfds, memory_order_relaxed) > 0;
    uint32_t value = poller && !(loop->backend_caps & EVLOOP__CAP_WORD_WAKE) ? EVLOOP__SLEEP_POLLER
                                                                             : EVLOOP__SLEEP_WORD;
    atomic_store_explicit(&loop->phase, EVLOOP_SLEEPING, memory_order_relaxed);
    evloop__sleep_announce(&loop->sleep, value, needs_heavy, loop);
    ingress_fenced(loop);
    int n = 0;
    struct evloop__io_event ev[EVLOOP__IO_EVENTS_MAX];
    if (sleep_cancelled(loop, epoch, poller)) {
        evloop__sleep_cancel(&loop->sleep);
    } else {
        uint64_t start = evloop__clock_ns();
        if (poller) {
            evloop__count(&loop->stats.poller_sleeps, 1);
            n = evloop__wait_io(loop, timeout_ns, ev);
        } else {
            evloop__count(&loop->stats.futex_sleeps, 1);
            evloop__sleep_block(&loop->sleep, value, timeout_ns);
        }
        /* A producer that flipped the word woke us; otherwise it was the timeout or an fd. */
        bool woken = evloop__sleep_finish(&loop->sleep);
        evloop__spin_slept(&loop->spin, woken ? (int64_t)(evloop__clock_ns() - start) : -1);
    }
    /* Awake (word and phase) before any fd callback runs. */
    atomic_store_explicit(&loop->phase, EVLOOP_RUNNING, memory_order_relaxed);
    if (n > 0)
        evloop__dispatch_io(loop, ev, n);
    return n < 0 ? n : 0;
}

/* The next timer's timeout, bounded by cap_end (a clock time; UINT64_MAX: no bound), which
 * evloop_run_once's timeout sets. */
static int64_t wait_timeout(evloop *loop, uint64_t now, uint64_t cap_end)
{
    int64_t timeout = evloop__timer_timeout(loop, now);
    if (cap_end == UINT64_MAX)
        return timeout;
    int64_t left = now >= cap_end ? 0 : (int64_t)(cap_end - now);
    return timeout < 0 || timeout > left ? left : timeout;
}

static int wait_for_work(evloop *loop, int64_t max_wait_ns)
{
    bool poller = atomic_load_explicit(&loop->nfds, memory_order_relaxed) > 0;
    if (evloop__has_work(loop) || evloop__signals_pending(loop))
        return poller ? evloop__poll_io(loop, 0) : 0;
    if (loop->auto_exit && !poller && !evloop__has_timers(loop) && !evloop__signals_watched(loop) &&
        !evloop__work_busy(loop))
        return 0; /* nothing left: evloop_run() stops the loop instead of sleeping */
    uint32_t epoch = evloop__sleep_epoch(&loop->sleep);
    uint64_t now = evloop__clock_ns();
    uint64_t cap_end = max_wait_ns < 0 ? UINT64_MAX : now + (uint64_t)max_wait_ns;
    int64_t timeout = wait_timeout(loop, now, cap_end);
    if (timeout == 0)
        return poller ? evloop__poll_io(loop, 0) : 0;
    if (spin_for_work(loop, timeout, epoch))
        return 0;
    if (timeout > 0)
        timeout = wait_timeout(loop, evloop__clock_ns(), cap_end);
    int r = prepare_sleep(loop, evloop__work_doze(loop, timeout), epoch);
    evloop__work_doze_end(loop);
    return r;
}

/* A stopping loop whose pool still runs items (their done callbacks must run before the run
 * ends) and that has nothing else to do: sleeps on the word until a reply arrives, with the
 * announce and re-check of prepare_sleep() and no fds. The block is bounded (STOP_WAIT_NS):
 * on io_uring a futex wait the ring armed on the same word may still be queued, and a
 * waker's FUTEX_WAKE of one waiter could go to it instead. */
static void wait_for_pool(evloop *loop, int64_t max_wait_ns)
{
    if (max_wait_ns == 0)
        return;
    int64_t timeout = max_wait_ns > 0 && max_wait_ns < STOP_WAIT_NS ? max_wait_ns : STOP_WAIT_NS;
    evloop__sleep_announce(&loop->sleep, EVLOOP__SLEEP_WORD, needs_heavy, loop);
    ingress_fenced(loop);
    if (evloop__has_work(loop) || !evloop__work_busy(loop)) {
        evloop__sleep_cancel(&loop->sleep);
        return;
    }
    evloop__count(&loop->stats.futex_sleeps, 1);
    evloop__sleep_block(&loop->sleep, EVLOOP__SLEEP_WORD, timeout);
    evloop__sleep_finish(&loop->sleep);
}

/* Waits for work (at most max_wait_ns; -1: no bound but the timers) and runs fd callbacks,
 * with the PREPARE hooks before and the CHECK hooks after (hooks.c). */
static int poll_or_sleep(evloop *loop, int64_t max_wait_ns)
{
    if (atomic_load_explicit(&loop->stopping, memory_order_relaxed)) {
        /* Shutdown drains tasks only: no fd callbacks, no timers, no hooks. The pool's items
         * no thread has started are cancelled; the loop waits for those running. */
        evloop__work_stop(loop);
        evloop__work_flush(loop);
        if (evloop__work_busy(loop) && !evloop__has_work(loop))
            wait_for_pool(loop, max_wait_ns);
        return 0;
    }
    if (evloop__hooks_any(loop, EVLOOP_HOOK_PREPARE))
        evloop__run_hooks(loop, EVLOOP_HOOK_PREPARE);
    /* The pool threads' wakes this tick's submits deferred (work.c), once, after the last
     * callback that may submit before the wait. */
    evloop__work_flush(loop);
    int r = wait_for_work(loop, max_wait_ns);
    if (evloop__hooks_any(loop, EVLOOP_HOOK_CHECK))
        evloop__run_hooks(loop, EVLOOP_HOOK_CHECK);
    return r;
}

void evloop__tick_ready(evloop *loop)
{
    evloop__count(&loop->stats.ticks, 1);
    loop->now = evloop__clock_ns();
    if (!atomic_load_explicit(&loop->stopping, memory_order_relaxed)) {
        evloop__run_timers(loop);
        if (evloop__signals_pending(loop))
            evloop__run_signals(loop);
    }
    run_local(loop);
    drain_ingress(loop);
}

int evloop__tick_wait(evloop *loop, int64_t max_wait_ns)
{
    return poll_or_sleep(loop, max_wait_ns);
}

int evloop__tick(evloop *loop)
{
    evloop__tick_ready(loop);
    return evloop__tick_wait(loop, -1);
}

/* evloop_run_once is about to return with evloop_backend_fd in use: the loop parks on
 * SLEEP_EXTERNAL, where a producer's notify makes that fd readable (sleep.h). The same
 * announce and re-check as prepare_sleep(); poller says whether embed_fd.c put wait()'s
 * readiness in that fd. When the re-check finds anything, the loop notifies itself as a
 * producer would, so the fd is readable and the outer loop calls evloop_run_once again. */
void evloop__park(evloop *loop, bool poller)
{
    uint32_t epoch = evloop__sleep_epoch(&loop->sleep);
    evloop__sleep_park(&loop->sleep, needs_heavy, loop);
    ingress_fenced(loop);
    if (sleep_cancelled(loop, epoch, poller))
        evloop__sleep_notify(&loop->sleep);
}
