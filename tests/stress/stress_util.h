/* Helpers shared by the stress suites (tests/stress/stress_*.c) on top of ../test_util.h:
 * sizes that depend on the build (plain, ASan, TSan) and on the long mode (EVLOOP_LONG=1),
 * the wake watchdog, a seeded random generator, and an exactly-once ledger.
 *
 * Sizes: each test names its short sizes per build and its long sizes (the figures of the
 * reliability issue). EVLOOP_LONG=1 picks the long ones; EVLOOP_STRESS_SCALE=<factor>
 * multiplies whatever was picked (memcheck runs use 0.02). EVLOOP_SEED=<n> repeats a run. */
#ifndef EVLOOP_STRESS_UTIL_H
#define EVLOOP_STRESS_UTIL_H

#include "../test_util.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__)
#define STRESS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define STRESS_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define STRESS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STRESS_ASAN 1
#endif
#endif
#ifndef STRESS_TSAN
#define STRESS_TSAN 0
#endif
#ifndef STRESS_ASAN
#define STRESS_ASAN 0
#endif

static inline const char *stress_build(void)
{
    return STRESS_TSAN ? "tsan" : STRESS_ASAN ? "asan" : "plain";
}

static inline bool stress_env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

static inline bool stress_long(void)
{
    return stress_env_flag("EVLOOP_LONG");
}

/* Short sizes per build, then long sizes per build. */
struct stress_sizes {
    uint64_t plain, asan, tsan;
    uint64_t long_plain, long_asan, long_tsan;
};

static inline uint64_t stress_size(const char *what, struct stress_sizes s)
{
    bool lng = stress_long();
    uint64_t n = STRESS_TSAN ? (lng ? s.long_tsan : s.tsan)
               : STRESS_ASAN ? (lng ? s.long_asan : s.asan)
                             : (lng ? s.long_plain : s.plain);
    const char *scale = getenv("EVLOOP_STRESS_SCALE");
    if (scale && *scale) {
        double f = strtod(scale, NULL);
        if (f > 0)
            n = (uint64_t)((double)n * f);
    }
    if (n == 0)
        n = 1;
    printf("# size %s = %llu (%s build, %s mode)\n", what, (unsigned long long)n, stress_build(),
           lng ? "long" : "short");
    return n;
}

/* The wake watchdog: 1 s in a plain build, 10 s under a sanitizer (they slow every syscall
 * and atomic, and the machine has two shared cores); EVLOOP_WATCHDOG_MS overrides. */
static inline int64_t stress_watchdog_ms(void)
{
    const char *v = getenv("EVLOOP_WATCHDOG_MS");
    if (v && *v)
        return strtoll(v, NULL, 10);
    return STRESS_TSAN || STRESS_ASAN ? 10000 : 1000;
}

static inline uint64_t stress_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void stress_nap_ns(long ns)
{
    struct timespec ts = {.tv_sec = ns / 1000000000L, .tv_nsec = ns % 1000000000L};
    nanosleep(&ts, NULL);
}

/* ---- random numbers: xorshift64*, one state per thread ------------------------------- */

static inline uint64_t stress_seed(void)
{
    static uint64_t seed;
    if (!seed) {
        const char *v = getenv("EVLOOP_SEED");
        seed = v && *v ? strtoull(v, NULL, 0) : (stress_now_ns() ^ (uint64_t)getpid() << 32);
        if (!seed)
            seed = 1;
        printf("# seed %llu (repeat with EVLOOP_SEED=%llu)\n", (unsigned long long)seed,
               (unsigned long long)seed);
    }
    return seed;
}

static inline uint64_t stress_rand(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* A number in [0, n). */
static inline uint64_t stress_below(uint64_t *state, uint64_t n)
{
    return n ? stress_rand(state) % n : 0;
}

/* ---- exactly-once ledger: one byte per (producer, seq) ------------------------------- */

#define STRESS_MAX_PRODUCERS 8

struct stress_ledger {
    uint64_t n;                               /* seqs per producer */
    uint8_t *runs[STRESS_MAX_PRODUCERS];      /* loop thread only: times each task ran */
    uint64_t next[STRESS_MAX_PRODUCERS];      /* loop thread only: next seq expected */
    uint64_t order_violations;                /* loop thread only */
    uint64_t strays;                          /* loop thread only: bad producer or seq */
    test_counter total;                       /* tasks run, read by other threads */
};

static inline void stress_ledger_init(struct stress_ledger *l, uint64_t n)
{
    memset(l, 0, sizeof *l);
    l->n = n;
    for (int p = 0; p < STRESS_MAX_PRODUCERS; p++) {
        l->runs[p] = calloc(n + 1, 1);
        assert_non_null(l->runs[p]);
    }
    atomic_init(&l->total, 0);
}

static inline void stress_ledger_free(struct stress_ledger *l)
{
    for (int p = 0; p < STRESS_MAX_PRODUCERS; p++)
        free(l->runs[p]);
}

/* A task argument: producer in the top byte, seq below. */
static inline void *stress_ledger_arg(unsigned producer, uint64_t seq)
{
    return (void *)(uintptr_t)((uint64_t)producer << 56 | seq);
}

/* Records one run of the task with argument arg (loop thread). */
static inline void stress_ledger_run(struct stress_ledger *l, void *arg)
{
    uint64_t v = (uint64_t)(uintptr_t)arg;
    unsigned p = (unsigned)(v >> 56);
    uint64_t seq = v & ((UINT64_C(1) << 56) - 1);
    if (p >= STRESS_MAX_PRODUCERS || seq > l->n) {
        l->strays++;
    } else {
        if (l->runs[p][seq] < 255)
            l->runs[p][seq]++;
        if (seq != l->next[p])
            l->order_violations++;
        l->next[p] = seq + 1;
    }
    atomic_fetch_add_explicit(&l->total, 1, memory_order_release);
}

struct stress_tally {
    uint64_t lost, duplicated, order_violations, strays, phantom;
};

/* After the loop thread is joined: counts against accepted[p] tasks per producer (seqs
 * 0..accepted-1 must have run once; seq == accepted, never accepted, must not have run). */
static inline struct stress_tally stress_ledger_tally(const struct stress_ledger *l,
                                                      const uint64_t *accepted, unsigned producers)
{
    struct stress_tally t = {0, 0, l->order_violations, l->strays, 0};
    for (unsigned p = 0; p < producers; p++) {
        for (uint64_t s = 0; s < accepted[p]; s++) {
            if (l->runs[p][s] == 0)
                t.lost++;
            else if (l->runs[p][s] > 1)
                t.duplicated += l->runs[p][s] - 1u;
        }
        for (uint64_t s = accepted[p]; s <= l->n; s++)
            t.phantom += l->runs[p][s];
    }
    return t;
}

/* Every accepted task ran exactly once, in its producer's order, and nothing else ran. */
#define stress_assert_tally_clean(t)                                                               \
    do {                                                                                           \
        assert_int_equal((t).lost, 0);                                                             \
        assert_int_equal((t).duplicated, 0);                                                       \
        assert_int_equal((t).order_violations, 0);                                                 \
        assert_int_equal((t).strays, 0);                                                           \
        assert_int_equal((t).phantom, 0);                                                          \
    } while (0)

/* Waits until *counter reaches goal, failing only when it stops moving for stall_ms. */
static inline bool stress_wait_progress(test_counter *counter, uint64_t goal, int64_t stall_ms)
{
    uint64_t last = atomic_load(counter), since = stress_now_ns();
    for (;;) {
        uint64_t now_v = atomic_load_explicit(counter, memory_order_acquire);
        if (now_v >= goal)
            return true;
        if (now_v != last) {
            last = now_v;
            since = stress_now_ns();
        } else if (stress_now_ns() - since > (uint64_t)stall_ms * 1000000u) {
            return false;
        }
        stress_nap_ns(200000);
    }
}

/* The state order: AWAKE < RUNNING == SLEEPING < TERMINATING < TERMINATED. */
static inline int stress_state_rank(enum evloop_state s)
{
    switch (s) {
    case EVLOOP_AWAKE: return 0;
    case EVLOOP_RUNNING:
    case EVLOOP_SLEEPING: return 1;
    case EVLOOP_TERMINATING: return 2;
    case EVLOOP_TERMINATED: return 3;
    }
    return -1;
}

#endif
