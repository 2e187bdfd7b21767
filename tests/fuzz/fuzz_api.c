/* libFuzzer target: random API sequences on one loop, run on the fuzzer's thread. The input
 * is a program of one-byte operations (with argument bytes) executed from inside the
 * loop's callbacks: a driver task runs a few operations and resubmits itself, and every
 * callback the program creates (tasks, internal tasks, microtasks, timers, fd callbacks on
 * pipes) runs the next operation too, so calls come from every kind of callback. When the
 * program runs out the loop is stopped; it drains and evloop_run returns.
 *
 * Checked against a model: each return code (submit/timer/io calls, before and after stop),
 * every accepted task or microtask runs exactly once and a refused one never, a cancelled
 * timer never fires and a one-shot fires at most once, an fd callback only for a live
 * registration of that fd, no callback nested in another, evloop_run returns 0, and
 * evloop_free leaks nothing (LSan). The backend comes from $EVLOOP_BACKEND. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "evloop.h"

#define NPIPES 3
#define NFDS (2 * NPIPES) /* handle h: pipe h/2, end h%2 (0 read, 1 write) */
#define MAX_TASKS 8192
#define MAX_TIMERS 512

struct task_rec {
    uint8_t runs;
    bool accepted;
};

struct timer_rec {
    evloop_timer_id id;
    bool interval, cancelled, started;
    uint32_t fired;
};

struct fd_reg {
    bool active;
    unsigned events;
    uint32_t gen; /* bumped on add and remove */
};

struct fd_arg {
    int handle;
    uint32_t gen;
};

static struct {
    const uint8_t *d;
    size_t n, pos;
    evloop *loop;
    bool stopping;
    int depth;
    struct task_rec tasks[MAX_TASKS];
    size_t ntasks;
    struct timer_rec timers[MAX_TIMERS];
    size_t ntimers;
    int fds[NPIPES][2];
    struct fd_reg regs[NFDS];
    struct fd_arg args[NFDS][4]; /* per handle, by generation (mod 4) */
} g;

static void die(const char *what, long a, long b)
{
    fprintf(stderr, "fuzz_api: %s (%ld vs %ld) at byte %zu\n", what, a, b, g.pos);
    abort();
}

#define EXPECT(got, want, what)                                                             \
    do {                                                                                    \
        long got_ = (long)(got), want_ = (long)(want);                                      \
        if (got_ != want_)                                                                  \
            die(what, got_, want_);                                                         \
    } while (0)

static int next_byte(void)
{
    return g.pos < g.n ? g.d[g.pos++] : 0;
}

static void run_ops(int budget);

static void enter(void)
{
    if (g.depth++ != 0)
        die("a callback started inside another", g.depth, 1);
}

static void leave(void)
{
    g.depth--;
}

static void task_cb(void *arg)
{
    struct task_rec *t = arg;
    enter();
    if (!t->accepted)
        die("a refused task ran", (long)(t - g.tasks), 0);
    if (++t->runs > 1)
        die("a task ran twice", (long)(t - g.tasks), t->runs);
    run_ops(2);
    leave();
}

static void timer_cb(void *arg)
{
    struct timer_rec *t = arg;
    enter();
    if (t->cancelled)
        die("a cancelled timer fired", (long)(t - g.timers), 0);
    if (!t->interval && t->fired > 0)
        die("a one-shot timer fired twice", (long)(t - g.timers), t->fired);
    t->fired++;
    run_ops(2);
    leave();
}

static void io_cb(void *arg, int fd, unsigned events)
{
    struct fd_arg *a = arg;
    enter();
    struct fd_reg *r = &g.regs[a->handle];
    if (!r->active || r->gen != a->gen)
        die("fd callback for a removed registration", a->handle, (long)r->gen);
    if (fd != g.fds[a->handle / 2][a->handle % 2])
        die("fd callback with the wrong fd", fd, g.fds[a->handle / 2][a->handle % 2]);
    /* Bits of the events watched before an io_modify made in an earlier callback of the
     * same batch can still arrive (reported: tests/stress/stress_fdreuse.c); only bits
     * outside the API are an error here. */
    if (events == 0 || (events & ~(unsigned)(EVLOOP_READABLE | EVLOOP_WRITABLE | EVLOOP_HANGUP |
                                             EVLOOP_ERROR)))
        die("fd callback with no or unknown event bits", (long)events, (long)r->events);
    if (a->handle % 2 == 0) {
        char buf[64];
        while (read(fd, buf, sizeof buf) > 0)
            ;
    }
    run_ops(1);
    leave();
}

static struct task_rec *new_task(void)
{
    return g.ntasks < MAX_TASKS ? &g.tasks[g.ntasks++] : NULL;
}

static void do_submit(int kind)
{
    struct task_rec *t = new_task();
    if (!t)
        return;
    int r = kind == 0   ? evloop_submit(g.loop, task_cb, t)
            : kind == 1 ? evloop_submit_internal(g.loop, task_cb, t)
                        : evloop_queue_microtask(g.loop, task_cb, t);
    /* On the loop thread, a microtask is accepted until the end; tasks until stop. */
    int want = kind == 2 ? 0 : g.stopping ? -ESHUTDOWN : 0;
    EXPECT(r, want, "submit return code");
    t->accepted = r == 0;
}

static const uint64_t delays[] = {0, 1000, 10000, 50000};
static const uint64_t intervals[] = {0, 0, 5000, 20000};

static void do_timer_start(void)
{
    if (g.ntimers >= MAX_TIMERS)
        return;
    struct timer_rec *t = &g.timers[g.ntimers];
    int b = next_byte();
    uint64_t interval = intervals[(b >> 2) & 3];
    int r = evloop_timer_start(g.loop, delays[b & 3], interval, timer_cb, t, &t->id);
    EXPECT(r, g.stopping ? -ESHUTDOWN : 0, "timer_start return code");
    if (r == 0) {
        t->interval = interval != 0;
        t->started = true;
        if (t->id == 0)
            die("timer id 0", 0, 0);
        g.ntimers++;
    }
}

static void do_timer_cancel(void)
{
    int b = next_byte();
    if (g.ntimers == 0 || b == 255) {
        EXPECT(evloop_timer_cancel(g.loop, (uint64_t)b << 40 | 12345), -ENOENT, "cancel bogus");
        return;
    }
    struct timer_rec *t = &g.timers[b % g.ntimers];
    bool pending = !t->cancelled && (t->interval || t->fired == 0);
    int r = evloop_timer_cancel(g.loop, t->id);
    EXPECT(r, pending ? 0 : -ENOENT, "timer_cancel return code");
    if (r == 0)
        t->cancelled = true;
}

static unsigned pick_events(int b)
{
    switch (b & 7) {
    case 0: return EVLOOP_READABLE;
    case 1: return EVLOOP_WRITABLE;
    case 2: return EVLOOP_READABLE | EVLOOP_WRITABLE;
    case 3: return 0;                              /* invalid */
    case 4: return EVLOOP_HANGUP;                  /* invalid: reported only */
    case 5: return EVLOOP_READABLE | 0x40;         /* invalid bit */
    default: return (b & 1) ? EVLOOP_WRITABLE : EVLOOP_READABLE;
    }
}

static bool events_valid(unsigned e)
{
    return e != 0 && !(e & ~(unsigned)(EVLOOP_READABLE | EVLOOP_WRITABLE));
}

static void do_io(int op)
{
    int b = next_byte();
    int h = b % NFDS, fd = g.fds[h / 2][h % 2];
    struct fd_reg *r = &g.regs[h];
    unsigned ev = pick_events(b >> 3);
    int rc, want;
    switch (op) {
    case 0: /* add */
        want = !events_valid(ev) ? -EINVAL : g.stopping ? -ESHUTDOWN : r->active ? -EEXIST : 0;
        struct fd_arg *a = &g.args[h][(r->gen + 1) % 4];
        *a = (struct fd_arg){h, r->gen + 1};
        rc = evloop_io_add(g.loop, fd, ev, io_cb, a);
        EXPECT(rc, want, "io_add return code");
        if (rc == 0) {
            r->active = true;
            r->gen++;
            r->events = ev;
        }
        break;
    case 1: /* modify */
        want = !events_valid(ev) ? -EINVAL : g.stopping ? -ESHUTDOWN : !r->active ? -ENOENT : 0;
        rc = evloop_io_modify(g.loop, fd, ev);
        EXPECT(rc, want, "io_modify return code");
        if (rc == 0)
            r->events = ev;
        break;
    default: /* remove */
        rc = evloop_io_remove(g.loop, fd);
        EXPECT(rc, r->active ? 0 : -ENOENT, "io_remove return code");
        if (rc == 0) {
            r->active = false;
            r->gen++;
        }
    }
}

static void do_pipe(int op)
{
    int k = next_byte() % NPIPES;
    char buf[64];
    if (op == 0) {
        if (write(g.fds[k][1], "x", 1) < 0 && errno != EAGAIN)
            die("write", errno, 0);
    } else if (op == 1) {
        while (read(g.fds[k][0], buf, sizeof buf) > 0)
            ;
    } else if (!g.regs[2 * k].active && !g.regs[2 * k + 1].active) {
        /* Close and reopen: the numbers are likely reused at once. */
        close(g.fds[k][0]);
        close(g.fds[k][1]);
        if (pipe2(g.fds[k], O_NONBLOCK | O_CLOEXEC) != 0)
            die("pipe2", errno, 0);
    }
}

static void stop_once(void)
{
    if (!g.stopping) {
        EXPECT(evloop_stop(g.loop), 0, "stop");
        g.stopping = true;
    }
}

static void run_ops(int budget)
{
    for (; budget > 0; budget--) {
        if (g.pos >= g.n) {
            stop_once();
            return;
        }
        int b = next_byte();
        switch (b % 16) {
        case 0: do_submit(0); break;
        case 1: do_submit(1); break;
        case 2: do_submit(2); break;
        case 3: do_timer_start(); break;
        case 4: do_timer_cancel(); break;
        case 5: do_io(0); break;
        case 6: do_io(1); break;
        case 7: do_io(2); break;
        case 8: do_pipe(0); break;
        case 9: do_pipe(1); break;
        case 10: do_pipe(2); break;
        case 11:
            if (b == 11) /* rarely: an early stop */
                stop_once();
            break;
        case 12: {
            enum evloop_state s = evloop_state(g.loop);
            /* Inside an fd callback after a poller sleep the state reads SLEEPING (a known
             * library bug, see tests/stress/stress_reentrancy.c): accepted here. */
            bool ok = g.stopping ? s == EVLOOP_TERMINATING
                                 : s == EVLOOP_RUNNING || s == EVLOOP_SLEEPING;
            if (!ok)
                die("state", s, g.stopping);
            struct evloop_stats st;
            EXPECT(evloop_stats(g.loop, &st), 0, "stats");
            break;
        }
        case 13:
            EXPECT(evloop_run(g.loop), -EBUSY, "run inside a callback");
            EXPECT(evloop_free(g.loop), -EBUSY, "free inside a callback");
            break;
        case 14:
            for (int k = next_byte() % 8; k > 0; k--)
                do_submit(2);
            break;
        default: /* 15: nothing */
            break;
        }
    }
}

static void driver(void *arg)
{
    (void)arg;
    enter();
    run_ops(4);
    if (!g.stopping && evloop_submit(g.loop, driver, NULL) != 0)
        die("driver resubmit refused", 0, 0);
    leave();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    memset(&g, 0, sizeof g);
    g.d = data;
    g.n = size;
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.spin_ns = 0;
    if (evloop_new(&g.loop, &cfg) != 0)
        die("evloop_new", 0, 0);
    for (int k = 0; k < NPIPES; k++)
        if (pipe2(g.fds[k], O_NONBLOCK | O_CLOEXEC) != 0)
            die("pipe2", errno, 0);
    if (evloop_submit(g.loop, driver, NULL) != 0)
        die("first submit", 0, 0);
    EXPECT(evloop_run(g.loop), 0, "evloop_run");
    EXPECT(evloop_state(g.loop), EVLOOP_TERMINATED, "state after run");
    for (size_t i = 0; i < g.ntasks; i++)
        if (g.tasks[i].accepted && g.tasks[i].runs != 1)
            die("an accepted task did not run exactly once", (long)i, g.tasks[i].runs);
    EXPECT(evloop_free(g.loop), 0, "evloop_free");
    for (int k = 0; k < NPIPES; k++) {
        close(g.fds[k][0]);
        close(g.fds[k][1]);
    }
    return 0;
}
