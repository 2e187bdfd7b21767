/* The evloop adapter of the benchmark seam (system.h). bench/CMakeLists.txt compiles it
 * once per ingress variant with BENCH_EVLOOP_VARIANT=arena|chunk and links each copy with
 * its own libevloop_<variant>.a into one relocatable object in which only
 * bench_system_evloop_<variant> stays global, so both variants live in one binary. The
 * Python benchmark subpackage compiles it with BENCH_EVLOOP_C_API=1 instead: see below. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "evloop.h"
#include "system.h"

#ifndef BENCH_EVLOOP_VARIANT
#error "compile with -DBENCH_EVLOOP_VARIANT=arena or chunk"
#endif

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define STR2(a) #a
#define STR(a) STR2(a)
#define SYSTEM_SYMBOL CAT(bench_system_evloop_, BENCH_EVLOOP_VARIANT)

/* With BENCH_EVLOOP_C_API=1 (the Python kernels module, evloop.bench._kernels) the adapter links no
 * library: it calls the evloop_* functions of the loop module of its variant, evloop._arena or
 * evloop._chunk, through the table that module hands over (bindings/python/src/c_api.h), which
 * that module's init stores in bench_evloop_c_api_<variant>. A Python process then holds
 * one copy of each variant, the one its loops run; the price is one load and an indirect
 * call per library call, beside the indirect call through struct bench_system that every
 * system pays. The macros keep the calls below spelled as the API's. */
#if BENCH_EVLOOP_C_API
#include "c_api.h"
#define C_API CAT(bench_evloop_c_api_, BENCH_EVLOOP_VARIANT)
extern const struct evloop_py_c_api *C_API;
#define evloop_ingress() C_API->ingress()
#define evloop_config_init(...) C_API->config_init(__VA_ARGS__)
#define evloop_new(...) C_API->new_loop(__VA_ARGS__)
#define evloop_free(...) C_API->free_loop(__VA_ARGS__)
#define evloop_run(...) C_API->run(__VA_ARGS__)
#define evloop_stop(...) C_API->stop(__VA_ARGS__)
#define evloop_submit(...) C_API->submit(__VA_ARGS__)
#define evloop_submit_internal(...) C_API->submit_internal(__VA_ARGS__)
#define evloop_queue_microtask(...) C_API->queue_microtask(__VA_ARGS__)
#define evloop_submit_batch(...) C_API->submit_batch(__VA_ARGS__)
#define evloop_timer_start(...) C_API->timer_start(__VA_ARGS__)
#define evloop_io_add(...) C_API->io_add(__VA_ARGS__)
#define evloop_io_remove(...) C_API->io_remove(__VA_ARGS__)
#define evloop_stats(...) C_API->stats(__VA_ARGS__)
#define evloop_backend(...) C_API->backend(__VA_ARGS__)
#endif

struct bench_loop {
    evloop *loop;
};

static int make_config(evloop_config *cfg, const struct bench_loop_config *bc)
{
    evloop_config_init(cfg);
    if (bc) {
        if (bc->backend)
            cfg->backend = bc->backend;
        cfg->batch_budget = bc->batch_budget;
        cfg->spin_ns = bc->spin_ns;
    }
    /* A figure names its profile or has none: $EVLOOP_PROFILE never changes it unseen. */
    cfg->profile = bc && bc->profile ? bc->profile : "";
    return 0;
}

static int probe(const char *backend)
{
    /* The library must be the variant this copy was built for; a mismatch would mean the
     * build linked the wrong archive, and every figure under this name would be a lie. */
    if (strcmp(evloop_ingress(), STR(BENCH_EVLOOP_VARIANT)) != 0)
        return -ENOTSUP;
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.backend = backend;
    cfg.profile = "";
    evloop *loop = NULL;
    int r = evloop_new(&loop, &cfg);
    if (r < 0)
        return r;
    /* "auto" may land elsewhere; an explicit name either starts or fails. */
    if (backend && strcmp(evloop_backend(loop), backend) != 0)
        r = -ENOTSUP;
    evloop_free(loop);
    return r;
}

static int create(struct bench_loop **out, const struct bench_loop_config *bc)
{
    struct bench_loop *l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    evloop_config cfg;
    make_config(&cfg, bc);
    int r = evloop_new(&l->loop, &cfg);
    if (r < 0) {
        free(l);
        return r;
    }
    *out = l;
    return 0;
}

static int run(struct bench_loop *l)
{
    return evloop_run(l->loop);
}

static void stop(struct bench_loop *l)
{
    evloop_stop(l->loop);
}

static void destroy(struct bench_loop *l)
{
    evloop_free(l->loop);
    free(l);
}

static int submit(struct bench_loop *l, bench_cb cb, void *arg)
{
    return evloop_submit(l->loop, cb, arg);
}

static int submit_internal(struct bench_loop *l, bench_cb cb, void *arg)
{
    return evloop_submit_internal(l->loop, cb, arg);
}

static int queue_microtask(struct bench_loop *l, bench_cb cb, void *arg)
{
    return evloop_queue_microtask(l->loop, cb, arg);
}

/* A bench_task array is passed as it is: the two structs must have one layout. */
_Static_assert(sizeof(struct bench_task) == sizeof(struct evloop_task) &&
                   offsetof(struct bench_task, cb) == offsetof(struct evloop_task, cb) &&
                   offsetof(struct bench_task, arg) == offsetof(struct evloop_task, arg),
               "struct bench_task must match struct evloop_task");

static int submit_batch(struct bench_loop *l, const struct bench_task *tasks, size_t n)
{
    return evloop_submit_batch(l->loop, (const struct evloop_task *)tasks, n);
}

static int timers_reserve(struct bench_loop *l, size_t n)
{
    /* evloop allocates its own timer records; that cost is part of what is measured. */
    return 0;
}

static int timer_start(struct bench_loop *l, uint64_t delay_ns, bench_cb cb, void *arg)
{
    return evloop_timer_start(l->loop, delay_ns, 0, cb, arg, NULL);
}

static int io_add(struct bench_loop *l, int fd, bench_io_cb cb, void *arg)
{
    return evloop_io_add(l->loop, fd, EVLOOP_READABLE, cb, arg);
}

static int io_remove(struct bench_loop *l, int fd)
{
    return evloop_io_remove(l->loop, fd);
}

static void stats(struct bench_loop *l, struct bench_loop_stats *out)
{
    struct evloop_stats s;
    memset(out, 0, sizeof(*out));
    if (evloop_stats(l->loop, &s) < 0)
        return;
    out->tasks = s.tasks_run;
    out->drains = s.ticks;
    out->wakes = (int64_t)(s.futex_wakes + s.poller_wakes);
    out->spin_hits = (int64_t)s.spin_hits;
    out->membarriers = (int64_t)s.membarriers;
    out->budget = s.batch_budget;
    out->spin_ns = s.spin_ns;
}

static const char *backend(struct bench_loop *l)
{
    return evloop_backend(l->loop);
}

const struct bench_system SYSTEM_SYMBOL = {
    .name = "evloop-" STR(BENCH_EVLOOP_VARIANT),
    .caps =
        BENCH_CAP_MPSC | BENCH_CAP_TIMERS | BENCH_CAP_IO | BENCH_CAP_BACKENDS | BENCH_CAP_TUNABLE,
    .probe = probe,
    .create = create,
    .run = run,
    .stop = stop,
    .destroy = destroy,
    .submit = submit,
    .submit_internal = submit_internal,
    .queue_microtask = queue_microtask,
    .submit_batch = submit_batch,
    .timers_reserve = timers_reserve,
    .timer_start = timer_start,
    .io_add = io_add,
    .io_remove = io_remove,
    .stats = stats,
    .backend = backend,
};
