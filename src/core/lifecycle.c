/* The lifecycle, the top layer of the core (docs/design.md, "Layers inside the core"):
 * evloop_config_init, evloop_new (the parts of a loop, its backend, its profile and tuning),
 * evloop_stop and evloop_free. It wires the subsystems together and calls the drivers
 * (run.c) to drain a loop that is freed before it has run to its end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embed_fd.h"
#include "error.h"
#include "hooks.h"
#include "io.h"
#include "ops.h"
#include "profile.h"
#include "signals.h"
#include "state.h"
#include "submit.h"
#include "timer.h"
#include "work.h"

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
    /* The pool first: its threads end and their reply lanes are announced, with a notify of
     * the loop. Then the queues: until they are freed, a producer thread that exits may
     * announce its lane and call the loop's notify (arena.c), which may reach the backend's
     * wake. */
    evloop__work_destroy(loop);
    evloop__ingress_free(loop->external);
    evloop__ingress_free(loop->internal);
    evloop__ingress_free(loop->remote_micro);
    if (loop->backend)
        loop->backend->destroy(loop->backend_state);
    evloop__sleep_destroy(&loop->sleep);
    evloop__taskq_destroy(&loop->local);
    evloop__taskq_destroy(&loop->local_internal);
    evloop__taskq_destroy(&loop->micro);
    evloop__timers_destroy(loop);
    evloop__ops_destroy(loop);
    evloop__io_destroy(loop);
    evloop__hooks_destroy(loop);
    evloop__embed_destroy(loop);
    free(loop);
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
    int r = evloop__sleep_init(&loop->sleep, cfg->fence, evloop__ingress_auto_seq_cst(),
                               &loop->fence_why);
    if (r < 0)
        return r;
    enum evloop__fence fence = loop->sleep.fence;
    const _Atomic uint32_t *word = &loop->sleep.word;
    if ((r = evloop__ingress_new(&loop->external, EXTERNAL_CAPACITY, fence, word, notify, loop)) < 0 ||
        (r = evloop__ingress_new(&loop->internal, SMALL_CAPACITY, fence, word, notify, loop)) < 0 ||
        (r = evloop__ingress_new(&loop->remote_micro, SMALL_CAPACITY, fence, word, notify, loop)) < 0 ||
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
    bool adaptive = cfg->spin_ns < 0;
    int64_t spin = p ? p->spin_ns : SPIN_START_NS;
    evloop__spin_init(&loop->spin, adaptive ? spin : cfg->spin_ns,
                      p && adaptive ? p->spin_max_ns : SPIN_MAX_NS, adaptive);
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
    evloop__timers_init(loop);
    evloop__io_init(loop);
    loop->fd_claim = evloop__ops_claim_fd; /* evloop_io_add asks ops.c (state.h) */
    evloop__signals_init(loop);
    evloop__embed_init(loop);
    atomic_init(&loop->phase, EVLOOP_AWAKE);
    r = create_parts(loop, cfg, p);
    if (r < 0) {
        destroy(loop);
        return r;
    }
    set_tuning(loop, cfg, p);
    loop->multi_cpu = evloop__usable_cpus() > 1;
    loop->auto_exit = cfg->auto_exit;
    *out = loop;
    return 0;
}

EVLOOP_API int evloop_stop(evloop *loop)
{
    if (!loop)
        return -EINVAL;
    evloop__stop(loop); /* submit.c: closes the way in */
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

