/* The work pool against libuv's uv_queue_work (issue 31): a work round trip (submit a no-op
 * from the loop thread, wait for its done callback, submit the next: p50 and p99 of each
 * round trip) and the throughput of many tiny items (all submitted at once from the loop
 * thread, time until the last done callback). Each system with its default pool (evloop:
 * evloop_work_config_init; libuv: 4 threads, UV_THREADPOOL_SIZE to change), unless
 * -t THREADS sets both (-s SPIN_NS: evloop's spin_ns). One line of JSON per run, for
 * bench/work_pool.sh to compare.
 *   work_pool evloop|libuv rtt [N]      (N round trips, default 20000; the first 1000 warm up)
 *   work_pool evloop|libuv tput [N]     (N items, default 1000000)
 *   work_pool evloop|libuv cpu [N]      (N items of about 20 us of arithmetic each, default
 *                                        20000, all submitted at once: the wall time, the
 *                                        process's CPU time and the items' own CPU time, and
 *                                        p50/p99 of the time from an item's end to its done)
 * A benchmark never asserts: a failed call prints an error and exits 1. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uv.h>

#include "evloop.h"

#define WARMUP 1000

static uint64_t clock_of(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ns(void)
{
    return clock_of(CLOCK_MONOTONIC);
}

/* The cpu mode's item: g_spins rounds of arithmetic (calibrated to CPU_ITEM_NS), its thread's
 * CPU time added to g_item_cpu. */
#define CPU_ITEM_NS 20000
static long g_spins;
static _Atomic uint64_t g_item_cpu;
static uint64_t g_loop_cpu; /* the loop thread's CPU time in the run */
static uint64_t *g_ended;   /* cpu mode: when each item's work ended (clock ns) */

static uint64_t arithmetic(long rounds)
{
    volatile uint64_t x = 1;
    for (long i = 0; i < rounds; i++)
        x = x * 6364136223846793005u + 1442695040888963407u;
    return x;
}

static void cpu_item_work(long i)
{
    uint64_t t0 = clock_of(CLOCK_THREAD_CPUTIME_ID);
    arithmetic(g_spins);
    g_item_cpu += clock_of(CLOCK_THREAD_CPUTIME_ID) - t0;
    g_ended[i] = now_ns(); /* the done callback, on the loop thread, reads it after the reply */
}


static void calibrate(void)
{
    long rounds = 1000;
    for (;;) {
        uint64_t t0 = clock_of(CLOCK_THREAD_CPUTIME_ID);
        arithmetic(rounds);
        uint64_t dt = clock_of(CLOCK_THREAD_CPUTIME_ID) - t0;
        if (dt > 5000000) {
            g_spins = (long)((double)rounds * CPU_ITEM_NS / (double)dt);
            return;
        }
        rounds *= 2;
    }
}

static long g_n, g_done;
static uint64_t *g_lat, g_t0, g_sent_at;
static unsigned g_threads;
static int64_t g_spin_ns = -2; /* -s: evloop's spin_ns; -2: the default */

/* cpu mode, in a done callback: how long item i's reply waited for it. */
static void note_done(long i)
{
    g_lat[g_done] = now_ns() - g_ended[i];
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void die(const char *what, int r)
{
    fprintf(stderr, "work_pool: %s: %d\n", what, r);
    exit(1);
}

static void report(const char *sys, const char *mode, uint64_t elapsed, uint64_t cpu)
{
    if (strcmp(mode, "cpu") == 0) {
        qsort(g_lat, (size_t)g_n, sizeof(*g_lat), cmp_u64);
        printf("{\"system\":\"%s\",\"mode\":\"cpu\",\"n\":%ld,\"threads\":%u,\"ns\":%llu,"
               "\"cpu_per_item_ns\":%.0f,\"item_cpu_ns\":%.0f,\"loop_cpu_per_item_ns\":%.0f,"
               "\"done_p50_ns\":%llu,\"done_p99_ns\":%llu}\n",
               sys, g_n, g_threads, (unsigned long long)elapsed, (double)cpu / (double)g_n,
               (double)g_item_cpu / (double)g_n, (double)g_loop_cpu / (double)g_n,
               (unsigned long long)g_lat[g_n / 2], (unsigned long long)g_lat[g_n * 99 / 100]);
    } else if (strcmp(mode, "rtt") == 0) {
        long m = g_n - WARMUP;
        qsort(g_lat + WARMUP, (size_t)m, sizeof(*g_lat), cmp_u64);
        printf("{\"system\":\"%s\",\"mode\":\"rtt\",\"n\":%ld,\"threads\":%u,\"p50_ns\":%llu,"
               "\"p99_ns\":%llu}\n",
               sys, m, g_threads, (unsigned long long)g_lat[WARMUP + m / 2],
               (unsigned long long)g_lat[WARMUP + m * 99 / 100]);
    } else {
        printf("{\"system\":\"%s\",\"mode\":\"tput\",\"n\":%ld,\"threads\":%u,\"ns\":%llu,"
               "\"items_per_s\":%.0f}\n",
               sys, g_n, g_threads, (unsigned long long)elapsed, g_n * 1e9 / (double)elapsed);
    }
}

/* ---- evloop -------------------------------------------------------------------------------- */

static evloop *g_loop;

static void noop(void *arg)
{
    (void)arg;
}

static void cpu_item(void *arg)
{
    cpu_item_work((long)(intptr_t)arg);
}

static void ev_rtt_done(void *arg, int status)
{
    (void)arg;
    if (status != 0)
        die("done status", status);
    g_lat[g_done++] = now_ns() - g_sent_at;
    if (g_done < g_n) {
        g_sent_at = now_ns();
        int r = evloop_work_submit(g_loop, noop, ev_rtt_done, NULL, NULL);
        if (r < 0)
            die("evloop_work_submit", r);
    }
}

static void ev_tput_done(void *arg, int status)
{
    (void)status;
    if (g_ended)
        note_done((long)(intptr_t)arg);
    g_done++;
}

static uint64_t run_evloop(const char *mode)
{
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.auto_exit = true;
    int r = evloop_new(&g_loop, &cfg);
    if (r < 0)
        die("evloop_new", r);
    struct evloop_work_config wc;
    evloop_work_config_init(&wc);
    if (g_threads)
        wc.threads = g_threads;
    if (g_spin_ns >= -1)
        wc.spin_ns = g_spin_ns;
    g_threads = wc.threads;
    if ((r = evloop_work_configure(g_loop, &wc)) < 0)
        die("evloop_work_configure", r);
    bool rtt = strcmp(mode, "rtt") == 0;
    g_t0 = now_ns();
    /* Before the run, this thread may submit (no thread runs the loop yet). */
    if (rtt) {
        g_sent_at = now_ns();
        r = evloop_work_submit(g_loop, noop, ev_rtt_done, NULL, NULL);
    } else {
        evloop_cb work = strcmp(mode, "cpu") == 0 ? cpu_item : noop;
        for (long i = 0; i < g_n && r == 0; i++)
            r = evloop_work_submit(g_loop, work, ev_tput_done, (void *)(intptr_t)i, NULL);
    }
    if (r < 0)
        die("evloop_work_submit", r);
    uint64_t loop_cpu0 = clock_of(CLOCK_THREAD_CPUTIME_ID);
    if ((r = evloop_run(g_loop)) < 0)
        die("evloop_run", r);
    g_loop_cpu = clock_of(CLOCK_THREAD_CPUTIME_ID) - loop_cpu0;
    uint64_t elapsed = now_ns() - g_t0;
    evloop_free(g_loop);
    return elapsed;
}

/* ---- libuv --------------------------------------------------------------------------------- */

static uv_loop_t g_uv;
static uv_work_t *g_reqs;

static void uv_noop(uv_work_t *req)
{
    (void)req;
}

static void uv_cpu_item(uv_work_t *req)
{
    cpu_item_work((long)(req - g_reqs));
}

static void uv_rtt_done(uv_work_t *req, int status)
{
    if (status != 0)
        die("after_work status", status);
    g_lat[g_done++] = now_ns() - g_sent_at;
    if (g_done < g_n) {
        g_sent_at = now_ns();
        int r = uv_queue_work(&g_uv, req, uv_noop, uv_rtt_done);
        if (r < 0)
            die("uv_queue_work", r);
    }
}

static void uv_tput_done(uv_work_t *req, int status)
{
    (void)status;
    if (g_ended)
        note_done((long)(req - g_reqs));
    g_done++;
}

static uint64_t run_libuv(const char *mode)
{
    if (g_threads) {
        char v[16];
        snprintf(v, sizeof(v), "%u", g_threads);
        setenv("UV_THREADPOOL_SIZE", v, 1);
    }
    const char *env = getenv("UV_THREADPOOL_SIZE");
    g_threads = env ? (unsigned)atoi(env) : 4;
    int r = uv_loop_init(&g_uv);
    if (r < 0)
        die("uv_loop_init", r);
    bool rtt = strcmp(mode, "rtt") == 0;
    g_reqs = calloc(rtt ? 1 : (size_t)g_n, sizeof(*g_reqs));
    if (!g_reqs)
        die("calloc", -1);
    g_t0 = now_ns();
    if (rtt) {
        g_sent_at = now_ns();
        r = uv_queue_work(&g_uv, &g_reqs[0], uv_noop, uv_rtt_done);
    } else {
        uv_work_cb work = strcmp(mode, "cpu") == 0 ? uv_cpu_item : uv_noop;
        for (long i = 0; i < g_n && r == 0; i++)
            r = uv_queue_work(&g_uv, &g_reqs[i], work, uv_tput_done);
    }
    if (r < 0)
        die("uv_queue_work", r);
    uint64_t loop_cpu0 = clock_of(CLOCK_THREAD_CPUTIME_ID);
    uv_run(&g_uv, UV_RUN_DEFAULT);
    g_loop_cpu = clock_of(CLOCK_THREAD_CPUTIME_ID) - loop_cpu0;
    uint64_t elapsed = now_ns() - g_t0;
    uv_loop_close(&g_uv);
    free(g_reqs);
    return elapsed;
}

int main(int argc, char **argv)
{
    int a = 1;
    for (; argc - a > 2 && argv[a][0] == '-'; a += 2) {
        if (strcmp(argv[a], "-t") == 0)
            g_threads = (unsigned)atoi(argv[a + 1]);
        else if (strcmp(argv[a], "-s") == 0)
            g_spin_ns = atoll(argv[a + 1]);
    }
    if (argc - a < 2 || (strcmp(argv[a + 1], "rtt") != 0 && strcmp(argv[a + 1], "tput") != 0 &&
                         strcmp(argv[a + 1], "cpu") != 0)) {
        fprintf(stderr,
                "usage: work_pool [-t THREADS] [-s SPIN_NS] evloop|libuv rtt|tput|cpu [N]\n");
        return 2;
    }
    const char *sys = argv[a], *mode = argv[a + 1];
    bool rtt = strcmp(mode, "rtt") == 0, cpu = strcmp(mode, "cpu") == 0;
    g_n = argc - a > 2 ? atol(argv[a + 2]) : rtt || cpu ? 20000 : 1000000;
    if (cpu)
        calibrate();
    if (rtt && g_n <= WARMUP)
        g_n = WARMUP + 1;
    g_lat = rtt || cpu ? calloc((size_t)g_n, sizeof(*g_lat)) : NULL;
    g_ended = cpu ? calloc((size_t)g_n, sizeof(*g_ended)) : NULL;
    uint64_t elapsed = 0, cpu0 = clock_of(CLOCK_PROCESS_CPUTIME_ID);
    if (strcmp(sys, "evloop") == 0)
        elapsed = run_evloop(mode);
    else if (strcmp(sys, "libuv") == 0)
        elapsed = run_libuv(mode);
    else
        die("unknown system", 0);
    if (g_done != g_n)
        die("items lost", (int)(g_n - g_done));
    report(sys, mode, elapsed, clock_of(CLOCK_PROCESS_CPUTIME_ID) - cpu0);
    free(g_lat);
    free(g_ended);
    return 0;
}
