/* The hardware floors of the benchmark seam (system.h): the least any cross-thread
 * hand-off can cost on this machine, run through the same harness as the real loops.
 * A "loop" here is one cache line holding a single-slot mailbox (cb, arg) and a thread
 * that takes from it:
 *   floor-spin   the loop thread spins on the line: a hand-off is a cache-line ping-pong.
 *   floor-futex  the loop thread sleeps on a futex whenever the slot is empty and the
 *                producer wakes it: a hand-off is a futex wait/wake ping-pong.
 * One producer at a time (no BENCH_CAP_MPSC); submit waits while the slot is full. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "system.h"

enum { AWAKE = 0, SLEEPING = 1 };

struct bench_loop {
    /* The mailbox: one line, written by the producer, emptied by the loop thread. */
    _Alignas(64) _Atomic(bench_cb) slot_cb; /* NULL = empty */
    void *slot_arg;
    _Atomic uint32_t word; /* futex flavour: AWAKE or SLEEPING */
    _Atomic bool stopping;
    /* Counters, written by one side each. */
    _Alignas(64) _Atomic uint64_t tasks;
    _Alignas(64) _Atomic uint64_t wakes;
    bool sleeps;
};

static void futex_wait(_Atomic uint32_t *w, uint32_t val)
{
    syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *w)
{
    syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int probe(const char *backend)
{
    return 0;
}

static int create_common(struct bench_loop **out, bool sleeps)
{
    struct bench_loop *l = aligned_alloc(64, sizeof(struct bench_loop));
    if (!l)
        return -ENOMEM;
    atomic_init(&l->slot_cb, NULL);
    l->slot_arg = NULL;
    atomic_init(&l->word, AWAKE);
    atomic_init(&l->stopping, false);
    atomic_init(&l->tasks, 0);
    atomic_init(&l->wakes, 0);
    l->sleeps = sleeps;
    *out = l;
    return 0;
}

static int create_spin(struct bench_loop **out, const struct bench_loop_config *cfg)
{
    return create_common(out, false);
}

static int create_futex(struct bench_loop **out, const struct bench_loop_config *cfg)
{
    return create_common(out, true);
}

/* Futex flavour, loop thread: the Dekker half of the loop. */
static void sleep_until_work(struct bench_loop *l)
{
    /* seq_cst: pairs with the seq_cst store of slot_cb / stopping and the load of word
     * in wake_loop(): either the producer sees SLEEPING or we see its task. */
    atomic_store(&l->word, SLEEPING);
    if (!atomic_load(&l->slot_cb) && !atomic_load(&l->stopping))
        futex_wait(&l->word, SLEEPING);
    atomic_store_explicit(&l->word, AWAKE, memory_order_relaxed);
}

static int run(struct bench_loop *l)
{
    for (;;) {
        bench_cb cb = atomic_load_explicit(&l->slot_cb, memory_order_acquire);
        if (cb) {
            void *arg = l->slot_arg;
            /* release: pairs with the acquire in submit(), which may then reuse arg */
            atomic_store_explicit(&l->slot_cb, NULL, memory_order_release);
            cb(arg);
            atomic_store_explicit(&l->tasks,
                                  atomic_load_explicit(&l->tasks, memory_order_relaxed) + 1,
                                  memory_order_relaxed);
            continue;
        }
        if (atomic_load(&l->stopping))
            return 0;
        if (l->sleeps)
            sleep_until_work(l);
        else
            cpu_relax();
    }
}

/* Futex flavour, producer: wake the loop only if it sleeps; only the flipper calls. */
static void wake_loop(struct bench_loop *l)
{
    if (!l->sleeps)
        return;
    /* seq_cst: pairs with the store of SLEEPING in sleep_until_work() */
    if (atomic_load(&l->word) == SLEEPING && atomic_exchange(&l->word, AWAKE) == SLEEPING) {
        futex_wake(&l->word);
        atomic_fetch_add_explicit(&l->wakes, 1, memory_order_relaxed);
    }
}

static int submit(struct bench_loop *l, bench_cb cb, void *arg)
{
    /* acquire: pairs with the release in run() that emptied the slot */
    while (atomic_load_explicit(&l->slot_cb, memory_order_acquire))
        cpu_relax();
    l->slot_arg = arg;
    atomic_store(&l->slot_cb, cb); /* seq_cst: see sleep_until_work() */
    wake_loop(l);
    return 0;
}

static void stop(struct bench_loop *l)
{
    atomic_store(&l->stopping, true); /* seq_cst: see sleep_until_work() */
    wake_loop(l);
}

static void destroy(struct bench_loop *l)
{
    free(l);
}

static void stats(struct bench_loop *l, struct bench_loop_stats *out)
{
    out->tasks = atomic_load_explicit(&l->tasks, memory_order_relaxed);
    out->drains = out->tasks;
    out->wakes = (int64_t)atomic_load_explicit(&l->wakes, memory_order_relaxed);
    out->spin_hits = -1;
    out->membarriers = -1;
    out->budget = 0;
    out->spin_ns = -1;
}

static const char *backend(struct bench_loop *l)
{
    return l->sleeps ? "futex" : "spin";
}

const struct bench_system bench_system_floor_spin = {
    .name = "floor-spin",
    .caps = BENCH_CAP_FLOOR,
    .probe = probe,
    .create = create_spin,
    .run = run,
    .stop = stop,
    .destroy = destroy,
    .submit = submit,
    .stats = stats,
    .backend = backend,
};

const struct bench_system bench_system_floor_futex = {
    .name = "floor-futex",
    .caps = BENCH_CAP_FLOOR,
    .probe = probe,
    .create = create_futex,
    .run = run,
    .stop = stop,
    .destroy = destroy,
    .submit = submit,
    .stats = stats,
    .backend = backend,
};
