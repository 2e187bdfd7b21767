/* The sleep protocol, in one place: how the loop goes to sleep and how every other thread
 * (producers, remote timer and fd changes, stop, backends) makes sure it wakes up. The
 * proof sketch and the Promela model are in docs/design.md ("Sleep") and
 * tests/model/lanes.pml.
 *
 * The word holds one of the values below.
 *
 *   value         | stored by                         | meaning
 *   --------------+-----------------------------------+-------------------------------------
 *   AWAKE         | the loop (cancel, finish); a      | the loop runs, or will re-check its
 *                 | waker (exchange, before it wakes) | queues before it blocks
 *   SLEEP_WORD    | the loop (announce)               | it blocks on the word (futex, ulock,
 *                 |                                   | condvar; io_uring's futex wait SQE)
 *   SLEEP_POLLER  | the loop (announce)               | it blocks in the poller: wake it with
 *                 |                                   | backend->wake
 *   SLEEP_EXTERNAL| the loop (park, at the end of     | no thread runs the loop; an outer
 *                 | evloop_run_once, run_once.c)      | loop polls evloop_backend_fd: wake =
 *                 |                                   | write external_fd, which makes it
 *                 |                                   | readable (embed_fd.c)
 *
 *   call                    | thread     | does
 *   ------------------------+------------+-----------------------------------------------
 *   evloop__sleep_notify    | any        | after publishing work: light barrier, then the
 *                           |            | word; only the thread whose exchange flips a
 *                           |            | SLEEP_* value to AWAKE makes the wake call (and
 *                           |            | is told so: arena lanes learn from it)
 *   evloop__sleep_notify_   | any        | notify, skipped while a flag read after the
 *   unless                  |            | light barrier says the loop's sleep has a bound
 *                           |            | and it looks by itself after (the pool's doze)
 *   evloop__sleep_kick      | any        | bumps the epoch (a timer or fd changed), notify
 *   evloop__sleep_wake_word | backends   | the word branch of notify (io_uring's re-arm)
 *   evloop__sleep_announce  | loop       | stores SLEEP_*, then a full fence and, if a
 *                           |            | queue needs it, the heavy barrier: after
 *                           |            | it, the loop re-checks everything, then blocks
 *   evloop__sleep_cancel    | loop       | the re-check found work: back to AWAKE
 *   evloop__sleep_finish    | loop       | after blocking: AWAKE again; true when a waker
 *                           |            | (not a timeout or an fd) ended the sleep; also
 *                           |            | ends a park when a run starts (embed_fd.c)
 *   evloop__sleep_park      | loop       | stores SLEEP_EXTERNAL (release), heavy barrier;
 *                           |            | then the loop re-checks as after announce and, if
 *                           |            | it finds work, notifies itself (tick.c)
 *   evloop__sleep_kick_async| a signal   | kick, async-signal-safe: never calls a waker that
 *                           | handler    | takes a lock (condvar), see the function
 *
 * Invariant: work published before a producer's notify is seen by the loop's re-check,
 * or that producer sees SLEEP_* and wakes the loop. The barrier pair of barrier.h makes
 * the [publish; read word] and [store word; re-check] orders hold. */
#ifndef EVLOOP_SLEEP_H
#define EVLOOP_SLEEP_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "barrier.h"
#include "common.h"
#include "wake.h"

enum {
    EVLOOP__AWAKE = 0,
    EVLOOP__SLEEP_WORD = 1,
    EVLOOP__SLEEP_POLLER = 2,
    EVLOOP__SLEEP_EXTERNAL = 3,
};

struct evloop__sleep {
    /* Read by every producer after every publication; written around sleeps. */
    alignas(EVLOOP_CACHELINE) _Atomic uint32_t word;
    enum evloop__fence fence; /* read-only after init */
    struct evloop__waker *waker;
    const struct evloop__backend *backend; /* set once the backend is open */
    void *backend_state;
    int external_fd; /* SLEEP_EXTERNAL's wake: set once by embed_fd.c before the first park */
    bool word_wake_async_safe; /* the waker's wake is a bare syscall (not condvar) */
    bool signals_want_poller;  /* a loop watching a signal should sleep in the poller */
    /* Written by threads that change what the loop waits for, and by wakers. */
    alignas(EVLOOP_CACHELINE) _Atomic uint32_t epoch;
    _Atomic uint64_t word_wakes, poller_wakes;
    _Atomic uint64_t heavy_barriers; /* membarrier() calls the loop made (evloop_stats) */
};

/* fence_request: the config's fence name, auto_seq_cst: the ingress variant's reason to
 * prefer seq_cst for auto, or NULL (barrier.h); *why receives "" or why producers fence.
 * Returns 0, -EINVAL, -ENOTSUP or -ENOMEM. */
int evloop__sleep_init(struct evloop__sleep *s, const char *fence_request,
                       const char *auto_seq_cst, const char **why);
void evloop__sleep_destroy(struct evloop__sleep *s);

/* notify's slow half: the word read other than AWAKE. True when this call woke the loop. */
bool evloop__sleep_wake_loop(struct evloop__sleep *s);

/* True when this call woke the loop (its exchange replaced a SLEEP_* value). Inline: it
 * runs after every submit, and a busy loop's producers should pay a load, not a call. */
static inline bool evloop__sleep_notify(struct evloop__sleep *s)
{
    /* The light barrier orders the caller's publication before the read of the word;
     * it pairs with the heavy barrier in evloop__sleep_announce(). The relaxed read
     * keeps a busy loop's producers free of read-modify-writes on the word. */
    evloop__barrier_light(s->fence);
    if (atomic_load_explicit(&s->word, memory_order_relaxed) == EVLOOP__AWAKE)
        return false;
    return evloop__sleep_wake_loop(s);
}

/* notify, except while *bounded reads true: the loop sleeps with a bound and looks at the
 * queues when it ends (the work pool's doze, work.c). The flag is read after the light
 * barrier, as the word is: the loop clears it before it announces a sleep without that
 * bound, so either this read sees it cleared, or that announce's re-check sees the push
 * (tests/model/wake.pml, -DDOZE). */
static inline bool evloop__sleep_notify_unless(struct evloop__sleep *s, _Atomic bool *bounded)
{
    evloop__barrier_light(s->fence);
    if (atomic_load_explicit(&s->word, memory_order_relaxed) == EVLOOP__AWAKE ||
        atomic_load_explicit(bounded, memory_order_relaxed))
        return false;
    return evloop__sleep_wake_loop(s);
}
/* The loop's heavy barrier, counted when it is a membarrier() (evloop_stats). */
void evloop__sleep_heavy(struct evloop__sleep *s);
void evloop__sleep_kick(struct evloop__sleep *s);
void evloop__sleep_wake_word(_Atomic uint32_t *word);

static inline uint32_t evloop__sleep_epoch(struct evloop__sleep *s)
{
    /* relaxed: the loop reads it before spinning and again after the heavy barrier of
     * announce, which orders it against kick's [fetch_add; light barrier; word]. */
    return atomic_load_explicit(&s->epoch, memory_order_relaxed);
}

/* needs_heavy(arg): whether a push made with only the light barrier could go unseen without
 * the heavy one (tick.c asks the ingress queues); read after a full fence, and the heavy
 * barrier is skipped when not. */
void evloop__sleep_announce(struct evloop__sleep *s, uint32_t value,
                            bool (*needs_heavy)(void *), void *arg);
void evloop__sleep_park(struct evloop__sleep *s, bool (*needs_heavy)(void *), void *arg);
void evloop__sleep_kick_async(struct evloop__sleep *s);

/* Any thread: the loop is parked by evloop_run_once and nothing has woken it since. */
static inline bool evloop__sleep_parked(const struct evloop__sleep *s)
{
    /* relaxed: a hint for evloop_backend_timeout_ns; the fd is what the outer loop trusts. */
    return atomic_load_explicit(&s->word, memory_order_relaxed) == EVLOOP__SLEEP_EXTERNAL;
}
void evloop__sleep_cancel(struct evloop__sleep *s);
void evloop__sleep_block(struct evloop__sleep *s, uint32_t value, int64_t timeout_ns);
bool evloop__sleep_finish(struct evloop__sleep *s);

#endif
