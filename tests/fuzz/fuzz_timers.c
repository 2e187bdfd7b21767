/* libFuzzer target: the timer heap (src/core/timer.c) against a sorted model. White box: it
 * includes src/core/state.h and timer.h, makes a loop that never runs, and drives evloop__run_timers()
 * itself with a virtual clock: loop->now = T0 + v units + half a unit, where T0 is the real
 * clock when the loop was made and a unit is 10 s. Timers are started with whole-unit
 * delays, so a timer of delay d is due exactly when v >= d (an input runs in far less than
 * half a unit, even on a loaded machine), and timers of
 * equal deadline fire in start order. The model replays pop_due(): the earliest (deadline,
 * start order) pending timer fires if due, and an interval timer is re-armed on its grid
 * (deadline + k * interval) at the first point after the clock, skipping missed periods.
 *
 * Operations: start (delay 0..6 s or saturating, interval 0..3 s or saturating), cancel,
 * advance the clock and run the timers, check the published timeout; callbacks start and
 * cancel timers too. Every fire is compared in order with the model, every cancel code,
 * evloop__timer_timeout() and evloop__has_timers(), saturated deadlines included. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"
#include "timer.h"

#define UNIT 10000000000ull /* 10 s: half of it is the slack for real time */
#define INF UINT64_MAX
#define MAX_TIMERS 256

struct mtimer {
    evloop_timer_id id;
    uint64_t d;        /* deadline in units after T0, INF when saturated */
    uint64_t interval; /* units, INF when saturating */
    uint64_t order;
    bool pending;
};

static struct {
    const uint8_t *d;
    size_t n, pos;
    evloop *loop;
    uint64_t t0, v, order;
    struct mtimer t[MAX_TIMERS];
    size_t nt;
} g;

static void die(const char *what, long long a, long long b)
{
    fprintf(stderr, "fuzz_timers: %s (%lld vs %lld) at byte %zu, v %llu\n", what, a, b, g.pos,
            (unsigned long long)g.v);
    abort();
}

static int next_byte(void)
{
    return g.pos < g.n ? g.d[g.pos++] : 0;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a == INF || b == INF || a > INF - b ? INF : a + b;
}

/* The model's pop_due(): the index of the timer that fires next in this tick, or -1. */
static long model_top(void)
{
    long best = -1;
    for (size_t i = 0; i < g.nt; i++) {
        struct mtimer *m = &g.t[i];
        if (!m->pending)
            continue;
        if (best < 0 || m->d < g.t[best].d || (m->d == g.t[best].d && m->order < g.t[best].order))
            best = (long)i;
    }
    return best;
}

static long model_pop(void)
{
    long i = model_top();
    if (i < 0)
        return -1;
    struct mtimer *m = &g.t[i];
    if (m->d == INF || m->d > g.v)
        return -1;
    if (m->interval) {
        uint64_t missed = m->interval == INF ? 0 : (g.v - m->d) / m->interval;
        m->d = m->interval == INF ? INF : sat_add(m->d, (missed + 1) * m->interval);
    } else {
        m->pending = false;
    }
    return i;
}

static void fire(void *arg);

static void op_start(void)
{
    if (g.nt >= MAX_TIMERS)
        return;
    int b = next_byte();
    uint64_t d = (uint64_t)(b & 7), iv = (uint64_t)((b >> 3) & 3);
    uint64_t delay_ns = d == 7 ? UINT64_MAX : d * UNIT;
    uint64_t iv_ns = (b & 0x60) == 0x60 && iv == 3 ? UINT64_MAX - 5 : iv * UNIT;
    struct mtimer *m = &g.t[g.nt];
    int r = evloop_timer_start(g.loop, delay_ns, iv_ns, fire, (void *)(uintptr_t)g.nt, &m->id);
    if (r != 0)
        die("timer_start", r, 0);
    m->d = d == 7 ? INF : d;
    m->interval = iv_ns == 0 ? 0 : iv_ns == UINT64_MAX - 5 ? INF : iv;
    m->order = g.order++;
    m->pending = true;
    g.nt++;
}

static void op_cancel(void)
{
    int b = next_byte();
    if (g.nt == 0 || b >= 250) {
        int r = evloop_timer_cancel(g.loop, (uint64_t)b << 33 | (uint64_t)b);
        if (r != -ENOENT)
            die("cancel of a bogus id", r, -ENOENT);
        return;
    }
    struct mtimer *m = &g.t[b % g.nt];
    int r = evloop_timer_cancel(g.loop, m->id);
    if (r != (m->pending ? 0 : -ENOENT))
        die("cancel return code", r, m->pending ? 0 : -ENOENT);
    m->pending = false;
}

static void fire(void *arg)
{
    size_t idx = (size_t)(uintptr_t)arg;
    long want = model_pop();
    if (want != (long)idx)
        die("fired a different timer than the model", (long long)idx, want);
    switch (next_byte() % 4) {
    case 1: op_cancel(); break;
    case 2: op_start(); break;
    default: break;
    }
}

static void check_published(void)
{
    long top = model_top();
    int64_t timeout = evloop__timer_timeout(g.loop, g.loop->now);
    uint64_t d = top < 0 ? INF : g.t[top].d;
    /* A saturated deadline is a real, far one: a positive timeout, never "no timer". */
    int64_t want_sign = top < 0 ? -1 : d != INF && d <= g.v ? 0 : 1;
    int64_t sign = timeout < 0 ? -1 : timeout == 0 ? 0 : 1;
    if (sign != want_sign)
        die("timer_timeout sign", sign, want_sign);
    bool any = false;
    for (size_t i = 0; i < g.nt; i++)
        any |= g.t[i].pending;
    if (evloop__has_timers(g.loop) != any)
        die("has_timers", evloop__has_timers(g.loop), any);
}

static void advance(int b)
{
    g.v += (uint64_t)(b & 3);
    g.loop->now = g.t0 + g.v * UNIT + UNIT / 2;
    evloop__run_timers(g.loop);
    if (model_pop() >= 0)
        die("a due timer did not fire in its tick", g.pos, 0);
    check_published();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    memset(&g, 0, sizeof g);
    g.d = data;
    g.n = size;
    evloop_config cfg;
    evloop_config_init(&cfg);
    if (evloop_new(&g.loop, &cfg) != 0)
        die("evloop_new", 0, 0);
    g.t0 = evloop_now_ns();
    g.loop->now = g.t0 + UNIT / 2;
    while (g.pos < g.n) {
        int b = next_byte();
        switch (b % 4) {
        case 0: op_start(); break;
        case 1: op_cancel(); break;
        case 2: advance(b >> 2); break;
        default: check_published(); break;
        }
    }
    if (evloop_now_ns() - g.t0 > UNIT / 2)
        die("the input ran longer than the model allows (half a unit)", 0, 0);
    evloop_stop(g.loop);
    if (evloop_free(g.loop) != 0)
        die("evloop_free", 0, 0);
    return 0;
}
