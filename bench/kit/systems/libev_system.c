/* The libev baseline of the benchmark seam (system.h): one ev_loop (EVFLAG_AUTO, which is
 * epoll on Linux), an ev_async watcher and the mutex-protected queue of locked_queue.h
 * drained in the async callback: the idiomatic libev cross-thread pattern. Producers call
 * ev_async_send after every push; libev coalesces those and writes its eventfd only when
 * the loop is about to block. Timers are ev_timer, fds ev_io. */
#include <errno.h>
#include <ev.h>
#include <stdlib.h>

#include "locked_queue.h"
#include "system.h"

struct timer_slot {
    ev_timer w;
    bench_cb cb;
    void *arg;
};

struct io_slot {
    ev_io w;
    bench_io_cb cb;
    void *arg;
    struct io_slot *next;
};

struct bench_loop {
    struct ev_loop *loop;
    ev_async async;
    struct locked_queue q;
    struct timer_slot *timers; /* handles for timers_reserve(); loop thread only */
    size_t timers_cap, timers_used;
    struct io_slot *ios;
};

static int probe(const char *backend)
{
    return 0;
}

static void async_cb(struct ev_loop *loop, ev_async *w, int revents)
{
    struct bench_loop *l = w->data;
    if (lq_drain(&l->q))
        ev_break(loop, EVBREAK_ALL);
}

static int create(struct bench_loop **out, const struct bench_loop_config *cfg)
{
    struct bench_loop *l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    int r = lq_init(&l->q);
    if (r < 0) {
        free(l);
        return r;
    }
    l->loop = ev_loop_new(EVFLAG_AUTO);
    if (!l->loop) {
        lq_destroy(&l->q);
        free(l);
        return -ENOMEM;
    }
    ev_async_init(&l->async, async_cb);
    l->async.data = l;
    ev_async_start(l->loop, &l->async);
    *out = l;
    return 0;
}

static int run(struct bench_loop *l)
{
    ev_run(l->loop, 0);
    return 0;
}

static void stop(struct bench_loop *l)
{
    lq_mark_stopping(&l->q);
    ev_async_send(l->loop, &l->async);
}

static void destroy(struct bench_loop *l)
{
    while (l->ios) {
        struct io_slot *s = l->ios;
        l->ios = s->next;
        free(s);
    }
    ev_loop_destroy(l->loop);
    lq_destroy(&l->q);
    free(l->timers);
    free(l);
}

static int submit(struct bench_loop *l, bench_cb cb, void *arg)
{
    int r = lq_push(&l->q, cb, arg);
    if (r == 0)
        ev_async_send(l->loop, &l->async);
    return r;
}

static int timers_reserve(struct bench_loop *l, size_t n)
{
    /* Called only when no timer is pending, so the array may move. */
    if (n > l->timers_cap) {
        struct timer_slot *t = realloc(l->timers, n * sizeof(*t));
        if (!t)
            return -ENOMEM;
        l->timers = t;
        l->timers_cap = n;
    }
    l->timers_used = 0;
    return 0;
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct timer_slot *s = (struct timer_slot *)w;
    s->cb(s->arg);
}

static int timer_start(struct bench_loop *l, uint64_t delay_ns, bench_cb cb, void *arg)
{
    if (l->timers_used == l->timers_cap)
        return -ENOMEM;
    struct timer_slot *s = &l->timers[l->timers_used++];
    s->cb = cb;
    s->arg = arg;
    ev_timer_init(&s->w, timer_cb, (ev_tstamp)delay_ns * 1e-9, 0.);
    ev_timer_start(l->loop, &s->w);
    return 0;
}

static void io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct io_slot *s = (struct io_slot *)w;
    s->cb(s->arg, w->fd, 1u);
}

static int io_add(struct bench_loop *l, int fd, bench_io_cb cb, void *arg)
{
    struct io_slot *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->cb = cb;
    s->arg = arg;
    s->next = l->ios;
    l->ios = s;
    ev_io_init(&s->w, io_cb, fd, EV_READ);
    ev_io_start(l->loop, &s->w);
    return 0;
}

static int io_remove(struct bench_loop *l, int fd)
{
    for (struct io_slot **p = &l->ios; *p; p = &(*p)->next) {
        if ((*p)->w.fd == fd) {
            struct io_slot *s = *p;
            ev_io_stop(l->loop, &s->w);
            *p = s->next;
            free(s);
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
    switch (ev_backend(l->loop)) {
    case EVBACKEND_EPOLL: return "epoll";
    case EVBACKEND_POLL: return "poll";
    case EVBACKEND_SELECT: return "select";
    case EVBACKEND_LINUXAIO: return "linuxaio";
    case EVBACKEND_IOURING: return "io_uring";
    default: return "other";
    }
}

const struct bench_system bench_system_libev = {
    .name = "libev",
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
