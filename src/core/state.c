/* The public readers of a loop's state (state.h), the bottom layer of the core: what
 * evloop_state, evloop_stats and the other getters return, read from the fields and
 * counters the layers above write. No behaviour: nothing here changes a loop. */
#include "state.h"

_Thread_local char evloop__thread_mark EVLOOP_TLS_FAST;

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

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
        .spin_ns = evloop__spin_window(&loop->spin),
        .backend = loop->backend->name,
        .ingress = evloop__ingress_name(),
        .fallback = loop->fallback,
        .backend_reason = loop->backend_reason,
        .profile_loaded = loop->profile_loaded,
        .fence = evloop__barrier_name(loop->sleep.fence),
        .fence_reason = loop->fence_why,
        .lanes = evloop__ingress_lanes(loop->external),
        .membarriers = read_counter(&loop->sleep.heavy_barriers),
    };
    return 0;
}

EVLOOP_API const char *evloop_version(void)
{
    return STRINGIFY(EVLOOP_VERSION_MAJOR) "." STRINGIFY(EVLOOP_VERSION_MINOR) "." STRINGIFY(
        EVLOOP_VERSION_PATCH);
}

EVLOOP_API bool evloop_on_loop_thread(const evloop *loop)
{
    return loop && evloop__on_loop_thread(loop);
}
