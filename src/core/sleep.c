/* The sleep protocol (sleep.h): its producer half (notify, kick) and its loop half
 * (announce, cancel, block, finish). tick.c decides when to sleep and re-checks the
 * queues between announce and block; nothing else touches the word. */
#include <string.h>
#include <unistd.h>

#include "sleep.h"

int evloop__sleep_init(struct evloop__sleep *s, const char *fence_request,
                       const char *auto_seq_cst, const char **why)
{
    atomic_init(&s->word, EVLOOP__AWAKE);
    s->external_fd = -1;
    /* futex and ulock wake with one syscall; the condvar waker takes a mutex, which a signal
     * handler must not (evloop__sleep_kick_async). A loop watching a signal then sleeps in
     * the poller (signals.c). So it does under ThreadSanitizer, which runs a handler only when
     * its thread next enters a function it intercepts: epoll_wait is one, the futex wait (a
     * raw syscall) is not, and a loop woken there by a signal could re-check and sleep again
     * before the handler ran. */
    s->word_wake_async_safe = strcmp(evloop__waker_name(), "condvar") != 0;
    s->signals_want_poller = !s->word_wake_async_safe || EVLOOP__TSAN;
    int r = evloop__barrier_choose(fence_request, auto_seq_cst, &s->fence, why);
    if (r < 0)
        return r;
    return evloop__waker_new(&s->waker);
}

void evloop__sleep_destroy(struct evloop__sleep *s)
{
    evloop__waker_free(s->waker);
    s->waker = NULL;
}

static void wake(struct evloop__sleep *s, uint32_t was)
{
    if (was == EVLOOP__SLEEP_WORD) {
        atomic_fetch_add_explicit(&s->word_wakes, 1, memory_order_relaxed);
        evloop__waker_wake(s->waker, &s->word);
    } else if (was == EVLOOP__SLEEP_POLLER) {
        atomic_fetch_add_explicit(&s->poller_wakes, 1, memory_order_relaxed);
        s->backend->wake(s->backend_state);
    } else if (was == EVLOOP__SLEEP_EXTERNAL) {
        /* The embedding fd's wake (embed_fd.c, backend.h): it stays set until evloop_run_once
         * drains it. write(2) is async-signal-safe, as the futex wake is. EAGAIN: already
         * readable. */
        uint64_t one = 1;
        ssize_t n = write(s->external_fd, &one, sizeof(one));
        (void)n;
    }
}

bool evloop__sleep_wake_loop(struct evloop__sleep *s)
{
    /* seq_cst: one exchange wins against the loop's finish and other producers. */
    uint32_t was = atomic_exchange(&s->word, EVLOOP__AWAKE);
    wake(s, was);
    return was != EVLOOP__AWAKE;
}

void evloop__sleep_heavy(struct evloop__sleep *s)
{
    if (s->fence == EVLOOP__FENCE_MEMBARRIER)
        atomic_fetch_add_explicit(&s->heavy_barriers, 1, memory_order_relaxed);
    evloop__barrier_heavy(s->fence);
}

void evloop__sleep_kick(struct evloop__sleep *s)
{
    atomic_fetch_add_explicit(&s->epoch, 1, memory_order_relaxed);
    /* A full fence: a kick is rare (a timer or fd changed from another thread, stop), and
     * the loop may skip its heavy barrier (heavy_if_needed). */
    evloop__fence();
    if (atomic_load_explicit(&s->word, memory_order_relaxed) != EVLOOP__AWAKE)
        wake(s, atomic_exchange(&s->word, EVLOOP__AWAKE));
}

void evloop__sleep_wake_word(_Atomic uint32_t *word)
{
    /* Only with CAP_WORD_WAKE, which only the futex waker offers: its wake needs no
     * waker state. seq_cst: as in notify; the caller published under a lock before. */
    evloop__fence();
    if (atomic_load_explicit(word, memory_order_relaxed) == EVLOOP__SLEEP_WORD &&
        atomic_exchange(word, EVLOOP__AWAKE) == EVLOOP__SLEEP_WORD)
        evloop__waker_wake(NULL, word);
}

/* After the word is stored: a full fence, then the heavy barrier only where a push made
 * with only the light barrier could otherwise go unseen (needs_heavy, ingress.h). The fence
 * pairs with the full barrier of everything else that may wake the loop: kicks, a lane's
 * first push and every push that wins its lane's announce exchange (arena); chunk's pushes
 * are ordered by the queue's mutex, which _fenced takes after this. So a loop whose producers are silent, or post now and then, pays the
 * membarrier once after each burst, not before every sleep: it sends an IPI to every CPU
 * running a thread of the process, which costs microseconds on a VM when a sibling runs. */
static void heavy_if_needed(struct evloop__sleep *s, bool (*needs_heavy)(void *), void *arg)
{
    evloop__fence();
    if (s->fence == EVLOOP__FENCE_MEMBARRIER && needs_heavy(arg))
        evloop__sleep_heavy(s);
}

void evloop__sleep_announce(struct evloop__sleep *s, uint32_t value,
                            bool (*needs_heavy)(void *), void *arg)
{
    atomic_store_explicit(&s->word, value, memory_order_relaxed);
    /* Pairs with the light barrier of every producer (notify, and the ingress's own):
     * after it, either the loop's re-check sees a producer's publication, or that
     * producer sees this value. */
    heavy_if_needed(s, needs_heavy, arg);
}

void evloop__sleep_park(struct evloop__sleep *s, bool (*needs_heavy)(void *), void *arg)
{
    /* release: a waker whose exchange reads SLEEP_EXTERNAL then sees external_fd, which
     * embed_fd.c set before the loop thread could park. The barrier is announce's. */
    atomic_store_explicit(&s->word, EVLOOP__SLEEP_EXTERNAL, memory_order_release);
    heavy_if_needed(s, needs_heavy, arg);
}

/* kick for a signal handler (signals.c), which may interrupt any thread, the loop's included,
 * anywhere: only atomics and wake calls that are bare syscalls (futex, ulock, write to an
 * eventfd, epoll's and io_uring's backend->wake). A SLEEP_WORD on the condvar waker is left
 * alone: its wake takes a mutex the interrupted thread may hold. signals.c keeps an fd
 * registered on such a loop while it watches a signal, so that loop never blocks on the word
 * (the condvar waker offers no CAP_WORD_WAKE, so its poller sleeps are SLEEP_POLLER): its
 * re-check after announce (tick.c) sees the fd count and cancels such a sleep. A CAS rather
 * than an exchange, so such a word is never flipped without its wake. */
void evloop__sleep_kick_async(struct evloop__sleep *s)
{
    atomic_fetch_add_explicit(&s->epoch, 1, memory_order_relaxed);
    evloop__fence(); /* as kick's */
    uint32_t was = atomic_load_explicit(&s->word, memory_order_relaxed);
    for (;;) {
        if (was == EVLOOP__AWAKE || (was == EVLOOP__SLEEP_WORD && !s->word_wake_async_safe))
            return;
        /* seq_cst: as the exchange of notify; on failure, was is the value now. */
        if (atomic_compare_exchange_weak(&s->word, &was, EVLOOP__AWAKE))
            break;
    }
    wake(s, was);
}

void evloop__sleep_cancel(struct evloop__sleep *s)
{
    atomic_store_explicit(&s->word, EVLOOP__AWAKE, memory_order_relaxed);
}

void evloop__sleep_block(struct evloop__sleep *s, uint32_t value, int64_t timeout_ns)
{
    evloop__waker_wait(s->waker, &s->word, value, timeout_ns);
}

bool evloop__sleep_finish(struct evloop__sleep *s)
{
    /* seq_cst: against the exchange of a waker; AWAKE here means one flipped it. */
    return atomic_exchange(&s->word, EVLOOP__AWAKE) == EVLOOP__AWAKE;
}
