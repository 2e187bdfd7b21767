/* The adapter seam of the benchmark suite: every system under test (evloop in each ingress
 * variant, libev, libuv, the hardware floors) is one const struct bench_system, and every
 * benchmark family is written once against it. An adapter only creates a loop, runs it on
 * the thread the harness gives it, accepts cb(arg) from other threads and stops; the
 * harness (harness.h) owns the threads, the clocks and the counters. Plain C, so the
 * evloop adapter can be compiled once per ingress variant (see bench/CMakeLists.txt). */
#ifndef BENCH_SYSTEM_H
#define BENCH_SYSTEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*bench_cb)(void *arg);
/* Same shape as evloop_io_cb, so the evloop adapter passes it through untouched. */
typedef void (*bench_io_cb)(void *arg, int fd, unsigned events);

/* One task of a batch (submit_batch). Same layout as struct evloop_task, so the evloop
 * adapter hands an array of these to evloop_submit_batch as it is (it checks the layout). */
struct bench_task {
    bench_cb cb;
    void *arg;
};

struct bench_loop; /* one running loop of one system; private to its adapter */

/* What a loop is created with. Only evloop reads backend, budget, spin and profile; the
 * other systems have one way to run. */
struct bench_loop_config {
    const char *backend;   /* NULL = the system's default ("auto" for evloop) */
    unsigned batch_budget; /* evloop: external tasks per tick, 0 = adaptive */
    int64_t spin_ns;       /* evloop: spin before sleeping, -1 = adaptive, 0 = never */
    const char *profile;   /* evloop: a saved profile (evloop_autotune) to start from;
                              NULL = none, whatever $EVLOOP_PROFILE says */
};

/* Counters since the loop was created; the harness reports differences. */
struct bench_loop_stats {
    uint64_t tasks;    /* tasks run on the loop thread */
    uint64_t drains;   /* times the loop took a batch from its queue (evloop: ticks) */
    int64_t wakes;     /* wake syscalls producers made; -1 when the system cannot tell */
    int64_t spin_hits; /* evloop: spins that found work; -1 elsewhere */
    int64_t membarriers; /* evloop: membarrier() calls of the loop; -1 elsewhere */
    uint64_t budget;   /* evloop: batch budget in force now; 0 elsewhere */
    int64_t spin_ns;   /* evloop: spin window in force now; -1 elsewhere */
};

enum {
    BENCH_CAP_MPSC = 1u << 0,     /* many producers may submit at once */
    BENCH_CAP_TIMERS = 1u << 1,   /* timers_reserve / timer_start */
    BENCH_CAP_IO = 1u << 2,       /* io_add / io_remove */
    BENCH_CAP_BACKENDS = 1u << 3, /* one registration per backend in EVLOOP_BACKENDS */
    BENCH_CAP_TUNABLE = 1u << 4,  /* batch_budget and spin_ns mean something: evloop, and
                                     only evloop (the harness's "is this evloop") */
    BENCH_CAP_FLOOR = 1u << 5,    /* a hardware floor, not a loop */
};

struct bench_system {
    const char *name; /* "evloop-arena", "evloop-chunk", "libev", "libuv", "floor-spin", ... */
    unsigned caps;    /* BENCH_CAP_* */
    /* 0 when a loop with this backend can start on this machine, else a negative errno.
     * Any thread. */
    int (*probe)(const char *backend);
    /* Creates a loop, not yet running. Any thread. */
    int (*create)(struct bench_loop **out, const struct bench_loop_config *cfg);
    /* Runs the loop on the calling thread until stop() has been called and everything
     * submitted before it has run. */
    int (*run)(struct bench_loop *loop);
    /* Asks run() to return once all work accepted so far has run. Any thread. */
    void (*stop)(struct bench_loop *loop);
    /* Frees a loop whose run() has returned. */
    void (*destroy)(struct bench_loop *loop);
    /* Queues cb(arg) to run on the loop thread. Any thread (only one at a time when the
     * system lacks BENCH_CAP_MPSC). Returns 0 or a negative errno. */
    int (*submit)(struct bench_loop *loop, bench_cb cb, void *arg);
    /* Optional (NULL when the system has no such path; the harness then uses submit):
     * a task that runs before waiting external ones, and a microtask. Any thread. */
    int (*submit_internal)(struct bench_loop *loop, bench_cb cb, void *arg);
    int (*queue_microtask)(struct bench_loop *loop, bench_cb cb, void *arg);
    /* Optional (NULL when the system has no batch call): queues tasks[0..n) in order with
     * one call, all or none. Any thread (as submit). Returns 0 or a negative errno. */
    int (*submit_batch)(struct bench_loop *loop, const struct bench_task *tasks, size_t n);
    /* Loop thread only. timers_reserve makes room for n timers started afterwards (the
     * baselines need one handle per timer; evloop keeps its own), then timer_start starts
     * a one-shot timer that runs cb(arg) after delay_ns. */
    int (*timers_reserve)(struct bench_loop *loop, size_t n);
    int (*timer_start)(struct bench_loop *loop, uint64_t delay_ns, bench_cb cb, void *arg);
    /* Loop thread only: watches fd for readability (level-triggered) / stops watching. */
    int (*io_add)(struct bench_loop *loop, int fd, bench_io_cb cb, void *arg);
    int (*io_remove)(struct bench_loop *loop, int fd);
    /* Any thread; may be a moment old. */
    void (*stats)(struct bench_loop *loop, struct bench_loop_stats *out);
    /* The backend the loop really uses ("epoll", "io_uring", ...). */
    const char *(*backend)(struct bench_loop *loop);
};

/* The systems, one per adapter file. The evloop ones are built once per ingress variant
 * and come out of bench/CMakeLists.txt's symbol-localising step with only this name global. */
extern const struct bench_system bench_system_evloop_arena;
extern const struct bench_system bench_system_evloop_chunk;
extern const struct bench_system bench_system_libev;
extern const struct bench_system bench_system_libuv;
extern const struct bench_system bench_system_floor_spin;
extern const struct bench_system bench_system_floor_futex;

#ifdef __cplusplus
}
#endif

#endif
