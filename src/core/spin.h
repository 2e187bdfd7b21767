/* The spin-and-yield policy, stated once (docs/design.md, "Bounded waits"): the loop thread
 * (tick.c) and the pool threads (work.c) spin for work before they sleep, each with one
 * struct evloop__spin. A spin is worth its CPU only while it keeps finding work soon, and only
 * when no thread that has work waits for that CPU. So a spinner:
 *   - spins at most its window: adaptive, a spin that found nothing halves it, a sleep that a
 *     wake ended soon after it began widens it to cover that gap (up to max);
 *   - stops and pauses spinning (10 ms, doubling up to 1 s while it keeps happening) when its
 *     spin lost the CPU: a gap between two looks at the clock that only a preemption explains,
 *     so more threads are runnable than there are CPUs (producers on the loop's CPU);
 *   - does not spin, and ends a spin, while the threads with work (pool threads awake and
 *     not spinning: in an item or between two) fill the CPUs it shares with them
 *     (evloop__spin_room): a spin that waits out a CPU-bound item takes that item's CPU.
 * The sleep handshakes themselves are not here (sleep.h, work.c): the policy only decides
 * whether, and how long, to look before sleeping. A leaf: no evloop type. */
#ifndef EVLOOP_SPIN_H
#define EVLOOP_SPIN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct evloop__spin {
    _Atomic int64_t window; /* ns; 0: no spinning. Relaxed: evloop_stats reads the loop's */
    int64_t max;            /* ns; the adaptive window never grows past it */
    bool adaptive;
    uint64_t paused_until; /* clock ns; no spinning before it (the CPU was taken away) */
    uint64_t pause_ns;     /* length of the next such pause */
};

void evloop__spin_init(struct evloop__spin *s, int64_t window, int64_t max, bool adaptive);

/* Whether a spinner has a CPU of its own, given how many threads besides it have work now
 * (busy) and how many CPUs it shares with them. Where it has not, it does not spin: its spin
 * would wait on a CPU that a thread with work needs, and that thread's progress is what the
 * spin waits for. */
static inline bool evloop__spin_room(unsigned busy, long cpus)
{
    return (long)busy + 1 <= cpus;
}

/* The window a spin starting at `now` may use (0: none, paused or adapted down to nothing),
 * never past timeout_ns when that is >= 0. */
int64_t evloop__spin_begin(struct evloop__spin *s, uint64_t now, int64_t timeout_ns);

/* Inside a spin, between two looks at the clock (last, now): true when the gap says the CPU
 * was taken away; the spin must end, and spinning pauses. */
bool evloop__spin_lost_cpu(struct evloop__spin *s, uint64_t last, uint64_t now);

/* A spin that ran on its CPU to its end (hit: it found work). */
void evloop__spin_end(struct evloop__spin *s, bool hit);

/* A sleep after the spin ended: slept_ns, how long until a wake ended it, or -1 when no wake
 * did (a timeout, an fd). */
void evloop__spin_slept(struct evloop__spin *s, int64_t slept_ns);

static inline int64_t evloop__spin_window(const struct evloop__spin *s)
{
    return atomic_load_explicit((_Atomic int64_t *)&s->window, memory_order_relaxed);
}

#endif
