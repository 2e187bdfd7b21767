/* Loop lifecycle: evloop_new, evloop_run, evloop_stop, evloop_free, and the calls that
 * read a loop's state. The tick itself is in tick.c. Shutdown (design.md): stop closes
 * the ingress queues, so a racing submit is either accepted and run or refused; run
 * keeps ticking until everything accepted has run, then releases timers and fds. */
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "loop.h"
#include "profile.h"

#define EXTERNAL_CAPACITY 4096
#define SMALL_CAPACITY 256
#define LOCAL_CAPACITY 256
#define BUDGET_START 256
#define SPIN_START_NS 20000
#define SPIN_MAX_NS 100000 /* covers an idle gap of ~50 us plus the wake it saves */

EVLOOP_API void evloop_config_init(evloop_config *cfg)
{
    if (cfg)
        *cfg = (evloop_config){
            .backend = NULL, .batch_budget = 0, .spin_ns = -1, .auto_exit = false, .profile = NULL,
            .fence = NULL};
}

static void destroy(evloop *loop)
{
    /* The queues first: until they are freed, a producer thread that exits may announce its
     * lane and call the loop's notify (arena.c), which may reach the backend's wake. */
    evloop__ingress_free(loop->external);
    evloop__ingress_free(loop->internal);
    evloop__ingress_free(loop->remote_micro);
    if (loop->backend)
        loop->backend->destroy(loop->backend_state);
    evloop__sleep_destroy(&loop->sleep);
    evloop__taskq_destroy(&loop->local);
    evloop__taskq_destroy(&loop->local_internal);
    evloop__taskq_destroy(&loop->micro);
    evloop__destroy_timers(loop);
    evloop__ops_destroy(loop);
    free(loop->fds);
    pthread_mutex_destroy(&loop->timer_lock);
    pthread_mutex_destroy(&loop->io_lock);
    evloop__embed_destroy(&loop->embed);
    free(loop);
}

/* CPUs this process may run on: the affinity mask when it can be read (a process pinned
 * to one CPU of a large machine must not spin), else the online count. */
static long usable_cpus(void)
{
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        return CPU_COUNT(&set);
#endif
    return sysconf(_SC_NPROCESSORS_ONLN);
}

/* The profile evloop_new starts from: cfg->profile, else $EVLOOP_PROFILE ("" for either
 * means none). Returns 0 with *loaded set or not, or the load's -errno (the detail for
 * evloop_last_error() names the field or variable and the file). */
static int load_profile(const evloop_config *cfg, struct evloop_profile *p, bool *loaded)
{
    *loaded = false;
    const char *origin = cfg->profile ? "config.profile" : "EVLOOP_PROFILE";
    const char *path = cfg->profile ? cfg->profile : getenv("EVLOOP_PROFILE");
    if (!path || !*path)
        return 0;
    int r = evloop_profile_load(p, path);
    *loaded = r == 0;
    if (r == -EINVAL)
        return evloop__error_set(r, "%s=%s: not a valid evloop profile (evloop_profile_load "
                                 "lists what it must hold)", origin, path);
    if (r < 0)
        return evloop__error_set(r, "%s=%s: %s", origin, path, strerror(-r));
    return r;
}

/* Opens the backend; backend.c decides which: the config's, $EVLOOP_BACKEND's, the profile's,
 * or auto's, and keeps why for evloop_stats(). */
static int open_backend(evloop *loop, const evloop_config *cfg, const struct evloop_profile *p)
{
    struct evloop__backend_pick pick;
    int r = evloop__backend_open(cfg->backend, p, &loop->sleep.word, &pick);
    if (r < 0)
        return r;
    loop->backend = pick.backend;
    loop->backend_state = pick.state;
    loop->backend_caps = pick.caps;
    memcpy(loop->fallback, pick.fallback, sizeof(loop->fallback));
    memcpy(loop->backend_reason, pick.reason, sizeof(loop->backend_reason));
    return 0;
}

/* The ingress queues' way to wake the loop when they announce work outside a push (an
 * exiting thread's last lane). */
static void notify(void *loop)
{
    evloop__sleep_notify(&((evloop *)loop)->sleep);
}

static int create_parts(evloop *loop, const evloop_config *cfg, const struct evloop_profile *p)
{
    int r = evloop__sleep_init(&loop->sleep, cfg->fence, &loop->fence_why);
    if (r < 0)
        return r;
    unsigned fence = loop->sleep.fence;
    if ((r = evloop__ingress_new(&loop->external, EXTERNAL_CAPACITY, fence, notify, loop)) < 0 ||
        (r = evloop__ingress_new(&loop->internal, SMALL_CAPACITY, fence, notify, loop)) < 0 ||
        (r = evloop__ingress_new(&loop->remote_micro, SMALL_CAPACITY, fence, notify, loop)) < 0 ||
        (r = evloop__taskq_init(&loop->local, LOCAL_CAPACITY)) < 0 ||
        (r = evloop__taskq_init(&loop->local_internal, LOCAL_CAPACITY)) < 0 ||
        (r = evloop__taskq_init(&loop->micro, LOCAL_CAPACITY)) < 0 ||
        (r = open_backend(loop, cfg, p)) < 0)
        return r;
    loop->sleep.backend = loop->backend;
    loop->sleep.backend_state = loop->backend_state;
    return 0;
}

/* A profile's budget as the adaptive rule can use it: a power of two (it doubles and
 * halves) within the adaptive range. */
static unsigned fit_budget(unsigned b)
{
    unsigned fit = EVLOOP__BUDGET_MIN;
    while (fit * 2 <= b && fit * 2 <= EVLOOP__BUDGET_MAX)
        fit *= 2;
    return fit;
}

/* Sets the adaptive starting points: the library's defaults, or the profile's. The config's
 * fixed values (spin_ns >= 0, batch_budget > 0) win over both. */
static void set_tuning(evloop *loop, const evloop_config *cfg, const struct evloop_profile *p)
{
    loop->budget_adaptive = cfg->batch_budget == 0;
    unsigned budget = p ? fit_budget(p->batch_budget) : BUDGET_START;
    atomic_init(&loop->budget, cfg->batch_budget ? cfg->batch_budget : budget);
    loop->spin_adaptive = cfg->spin_ns < 0;
    int64_t spin = p ? p->spin_ns : SPIN_START_NS;
    atomic_init(&loop->spin_window, cfg->spin_ns < 0 ? spin : cfg->spin_ns);
    loop->spin_max = p && loop->spin_adaptive ? p->spin_max_ns : SPIN_MAX_NS;
    loop->profile_loaded = p != NULL;
}

EVLOOP_API int evloop_new(evloop **out, const evloop_config *cfg)
{
    evloop__error_clear();
    if (!out)
        return evloop__error_set(-EINVAL, "out: NULL");
    *out = NULL;
    evloop_config defaults;
    if (!cfg) {
        evloop_config_init(&defaults);
        cfg = &defaults;
    }
    if (cfg->spin_ns < -1)
        return evloop__error_set(-EINVAL, "config.spin_ns %lld: below -1 (-1 adaptive, 0 never, "
                                 "> 0 ns)", (long long)cfg->spin_ns);
    struct evloop_profile profile;
    bool loaded;
    int r = load_profile(cfg, &profile, &loaded);
    if (r < 0)
        return r;
    const struct evloop_profile *p = loaded ? &profile : NULL;
    evloop *loop = aligned_alloc(EVLOOP_CACHELINE, sizeof(*loop));
    if (!loop)
        return -ENOMEM;
    memset(loop, 0, sizeof(*loop));
    pthread_mutex_init(&loop->timer_lock, NULL);
    pthread_mutex_init(&loop->io_lock, NULL);
    evloop__embed_init(&loop->embed);
    loop->free_timer = UINT32_MAX;
    atomic_init(&loop->next_deadline, UINT64_MAX);
    atomic_init(&loop->phase, EVLOOP_AWAKE);
    atomic_init(&loop->dispatch_fd, -1);
    r = create_parts(loop, cfg, p);
    if (r < 0) {
        destroy(loop);
        return r;
    }
    set_tuning(loop, cfg, p);
    loop->multi_cpu = usable_cpus() > 1;
    loop->auto_exit = cfg->auto_exit;
    *out = loop;
    return 0;
}

static bool nothing_left(evloop *loop)
{
    /* A watched signal keeps an auto_exit loop running, as a timer or an fd does. */
    return !evloop__has_work(loop) && !evloop__has_timers(loop) &&
           atomic_load_explicit(&loop->nfds, memory_order_relaxed) == 0 &&
           !evloop__signals_watched(&loop->embed);
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
            evloop_stop(loop);
        }
        /* Only once every queue is closed is "no work" final: until then a producer
         * may still be accepted by a queue that stop() has not reached yet. */
        bool closed = stop_seen(loop);
        if (closed && !evloop__has_work(loop))
            return err;
        if (loop->auto_exit && nothing_left(loop))
            evloop_stop(loop);
    }
}

/* evloop_run and evloop_run_once (embed.c) enter and leave a run through these: one thread
 * runs the loop at a time, and that thread is the loop thread until it leaves. */
int evloop__enter(evloop *loop)
{
    if (atomic_exchange(&loop->running, true))
        return -EBUSY;
    if (atomic_load(&loop->phase) == EVLOOP_TERMINATED) {
        atomic_store(&loop->running, false);
        return -ESHUTDOWN;
    }
    atomic_store_explicit(&loop->owner, (uintptr_t)pthread_self(), memory_order_relaxed);
#if EVLOOP__TSAN
    /* ThreadSanitizer makes a thread's signal state on the thread's first blocking call,
     * and a handler that runs meanwhile arms its signal in a second copy that the first then
     * overwrites: the signal is lost (measured: 1 in 60 first signals to a new loop thread).
     * A blocking call with nothing to wait for makes it here, before the loop reads as
     * running, so no delivery to this thread while it runs the loop can meet that race. */
    poll(NULL, 0, 0);
#endif
    atomic_store(&loop->phase, EVLOOP_RUNNING);
    evloop__embed_enter(loop);
    return 0;
}

/* evloop_run_once between its calls: no loop thread; the loop is AWAKE (not running). */
void evloop__leave(evloop *loop)
{
    atomic_store_explicit(&loop->owner, 0, memory_order_relaxed);
    atomic_store(&loop->phase, EVLOOP_AWAKE);
    atomic_store(&loop->running, false);
}

/* evloop_run_once after its iteration, as run_until_drained() after each tick: the auto_exit
 * rule, then whether the loop is done (closed, every accepted task run). A step added to
 * run_until_drained() after the tick belongs here too. */
bool evloop__drained(evloop *loop)
{
    if (loop->auto_exit && nothing_left(loop))
        evloop_stop(loop);
    return stop_seen(loop) && !evloop__has_work(loop); /* as in run_until_drained() */
}

/* The end of a run: what is still registered is released, each argument through the
 * release notification (embed.c), then the loop is TERMINATED. On the loop thread. */
void evloop__terminate(evloop *loop)
{
    evloop__release_signals(loop);
    evloop__release_timers(loop);
    evloop__release_fd_args(loop);
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

EVLOOP_API int evloop_stop(evloop *loop)
{
    if (!loop)
        return -EINVAL;
    if (atomic_exchange(&loop->stopping, true))
        return 0;
    evloop__ingress_close(loop->external);
    evloop__ingress_close(loop->internal);
    evloop__ingress_close(loop->remote_micro);
    /* seq_cst: pairs with the load of closed in run_until_drained(). */
    atomic_store(&loop->closed, true);
    evloop__sleep_kick(&loop->sleep);
    return 0;
}

EVLOOP_API int evloop_free(evloop *loop)
{
    if (!loop)
        return 0;
    if (atomic_load(&loop->running))
        return -EBUSY;
    if (atomic_load(&loop->phase) != EVLOOP_TERMINATED) {
        /* Never run to its end: run what was accepted on this thread, then free. */
        evloop_stop(loop);
        int r = evloop_run(loop);
        if (r == -EBUSY)
            return r;
    }
    destroy(loop);
    return 0;
}

EVLOOP_API enum evloop_state evloop_state(const evloop *loop)
{
    if (!loop)
        return EVLOOP_TERMINATED;
    int phase = atomic_load(&loop->phase);
    if (phase != EVLOOP_TERMINATED && atomic_load(&loop->stopping))
        return EVLOOP_TERMINATING;
    return (enum evloop_state)phase;
}

EVLOOP_API const char *evloop_backend(const evloop *loop)
{
    return loop ? loop->backend->name : NULL;
}

EVLOOP_API const char *evloop_ingress(void)
{
    return evloop__ingress_name();
}

EVLOOP_API uint64_t evloop_now_ns(void)
{
    return evloop__clock_ns();
}

static uint64_t read_counter(const _Atomic uint64_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

EVLOOP_API int evloop_stats(const evloop *loop, struct evloop_stats *out)
{
    if (!loop || !out)
        return -EINVAL;
    const struct evloop__stats_counters *c = &loop->stats;
    *out = (struct evloop_stats){
        .tasks_run = read_counter(&c->tasks_run),
        .microtasks_run = read_counter(&c->microtasks_run),
        .timers_fired = read_counter(&c->timers_fired),
        .io_callbacks = read_counter(&c->io_callbacks),
        .ticks = read_counter(&c->ticks),
        .futex_sleeps = read_counter(&c->futex_sleeps),
        .futex_wakes = read_counter(&loop->sleep.word_wakes),
        .poller_sleeps = read_counter(&c->poller_sleeps),
        .poller_wakes = read_counter(&loop->sleep.poller_wakes),
        .spin_hits = read_counter(&c->spin_hits),
        .spin_misses = read_counter(&c->spin_misses),
        .spin_preemptions = read_counter(&c->spin_preemptions),
        .ingress_overflows = evloop__ingress_overflows(loop->external),
        .batch_budget = atomic_load_explicit(&loop->budget, memory_order_relaxed),
        .spin_ns = atomic_load_explicit(&loop->spin_window, memory_order_relaxed),
        .backend = loop->backend->name,
        .ingress = evloop__ingress_name(),
        .fallback = loop->fallback,
        .backend_reason = loop->backend_reason,
        .profile_loaded = loop->profile_loaded,
        .fence = evloop__barrier_name(loop->sleep.fence),
        .fence_reason = loop->fence_why,
        .lanes = evloop__ingress_lanes(loop->external),
    };
    return 0;
}
