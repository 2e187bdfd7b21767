/* The libuv baseline of the benchmark seam (system.h): one uv_loop_t, a uv_async_t and the
 * mutex-protected queue of locked_queue.h drained in the async callback: the idiomatic
 * libuv cross-thread pattern. Producers call uv_async_send after every push; libuv
 * coalesces them (one eventfd write per drain, whether the loop sleeps or not). Timers
 * are uv_timer_t (millisecond resolution: delays are rounded up, never down), fds
 * uv_poll_t, the libuv way to watch a raw fd. */
#include <errno.h>
#include <stdlib.h>
#include <uv.h>

#include "locked_queue.h"
#include "system.h"

struct timer_slot {
    uv_timer_t h;
    bench_cb cb;
    void *arg;
};

/* Timer handles from an earlier, smaller reserve: closed, freed once the loop is closed. */
struct retired {
    struct timer_slot *slots;
    struct retired *next;
};

struct io_slot {
    uv_poll_t h;
    bench_io_cb cb;
    void *arg;
    int fd;
    struct io_slot *next;
};

struct bench_loop {
    uv_loop_t loop;
    uv_async_t async;
    struct locked_queue q;
    struct timer_slot *timers; /* initialised handles; loop thread only */
    size_t timers_cap, timers_used;
    struct retired *retired;
    struct io_slot *ios;
};

static int probe(const char *backend)
{
    return 0;
}

static void close_all(struct bench_loop *l)
{
    uv_close((uv_handle_t *)&l->async, NULL);
    for (size_t i = 0; i < l->timers_cap; i++)
        uv_close((uv_handle_t *)&l->timers[i].h, NULL);
    for (struct io_slot *s = l->ios; s; s = s->next)
        uv_close((uv_handle_t *)&s->h, NULL);
}

static void async_cb(uv_async_t *h)
{
    struct bench_loop *l = h->data;
    if (lq_drain(&l->q))
        close_all(l); /* with every handle closed, uv_run returns */
}

static int create(struct bench_loop **out, const struct bench_loop_config *cfg)
{
    struct bench_loop *l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    int r = lq_init(&l->q);
    if (r < 0)
        goto fail_free;
    r = uv_loop_init(&l->loop);
    if (r < 0)
        goto fail_queue;
    r = uv_async_init(&l->loop, &l->async, async_cb);
    if (r < 0)
        goto fail_loop;
    l->async.data = l;
    *out = l;
    return 0;
fail_loop:
    uv_loop_close(&l->loop);
fail_queue:
    lq_destroy(&l->q);
fail_free:
    free(l);
    return r;
}

static int run(struct bench_loop *l)
{
    return uv_run(&l->loop, UV_RUN_DEFAULT);
}

static void stop(struct bench_loop *l)
{
    lq_mark_stopping(&l->q);
    uv_async_send(&l->async);
}

static void destroy(struct bench_loop *l)
{
    uv_loop_close(&l->loop);
    while (l->retired) {
        struct retired *r = l->retired;
        l->retired = r->next;
        free(r->slots);
        free(r);
    }
    while (l->ios) {
        struct io_slot *s = l->ios;
        l->ios = s->next;
        free(s);
    }
    lq_destroy(&l->q);
    free(l->timers);
    free(l);
}

static int submit(struct bench_loop *l, bench_cb cb, void *arg)
{
    int r = lq_push(&l->q, cb, arg);
    if (r == 0)
        uv_async_send(&l->async);
    return r;
}

static void timer_cb(uv_timer_t *h)
{
    struct timer_slot *s = (struct timer_slot *)h;
    s->cb(s->arg);
}

static int timers_reserve(struct bench_loop *l, size_t n)
{
    l->timers_used = 0;
    if (n <= l->timers_cap)
        return 0;
    /* uv_close is asynchronous, so older handles are retired, not freed, until the loop
     * is closed. */
    struct retired *old = NULL;
    if (l->timers) {
        old = malloc(sizeof(*old));
        if (!old)
            return -ENOMEM;
    }
    struct timer_slot *t = malloc(n * sizeof(*t));
    if (!t) {
        free(old);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        uv_timer_init(&l->loop, &t[i].h);
    if (old) {
        for (size_t i = 0; i < l->timers_cap; i++)
            uv_close((uv_handle_t *)&l->timers[i].h, NULL);
        old->slots = l->timers;
        old->next = l->retired;
        l->retired = old;
    }
    l->timers = t;
    l->timers_cap = n;
    return 0;
}

static int timer_start(struct bench_loop *l, uint64_t delay_ns, bench_cb cb, void *arg)
{
    if (l->timers_used == l->timers_cap)
        return -ENOMEM;
    struct timer_slot *s = &l->timers[l->timers_used++];
    s->cb = cb;
    s->arg = arg;
    return uv_timer_start(&s->h, timer_cb, (delay_ns + 999999) / 1000000, 0);
}

static void poll_cb(uv_poll_t *h, int status, int events)
{
    struct io_slot *s = (struct io_slot *)h;
    s->cb(s->arg, s->fd, 1u);
}

static int io_add(struct bench_loop *l, int fd, bench_io_cb cb, void *arg)
{
    struct io_slot *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    int r = uv_poll_init(&l->loop, &s->h, fd);
    if (r < 0) {
        free(s);
        return r;
    }
    s->cb = cb;
    s->arg = arg;
    s->fd = fd;
    s->next = l->ios;
    l->ios = s;
    return uv_poll_start(&s->h, UV_READABLE, poll_cb);
}

static void free_on_close(uv_handle_t *h)
{
    free(h);
}

static int io_remove(struct bench_loop *l, int fd)
{
    for (struct io_slot **p = &l->ios; *p; p = &(*p)->next) {
        if ((*p)->fd == fd) {
            struct io_slot *s = *p;
            *p = s->next;
            uv_poll_stop(&s->h);
            uv_close((uv_handle_t *)&s->h, free_on_close);
            return 0;
        }
    }
    return -ENOENT;
}

static void stats(struct bench_loop *l, struct bench_loop_stats *out)
{
    lq_stats(&l->q, out);
}

static const char *backend(struct bench_loop *l)
{
    return "epoll";
}

const struct bench_system bench_system_libuv = {
    .name = "libuv",
    .caps = BENCH_CAP_MPSC | BENCH_CAP_TIMERS | BENCH_CAP_IO,
    .probe = probe,
    .create = create,
    .run = run,
    .stop = stop,
    .destroy = destroy,
    .submit = submit,
    .submit_internal = NULL,
    .queue_microtask = NULL,
    .timers_reserve = timers_reserve,
    .timer_start = timer_start,
    .io_add = io_add,
    .io_remove = io_remove,
    .stats = stats,
    .backend = backend,
};
