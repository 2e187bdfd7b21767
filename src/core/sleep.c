/* The sleep protocol (sleep.h): its producer half (notify, kick) and its loop half
 * (announce, cancel, block, finish). tick.c decides when to sleep and re-checks the
 * queues between announce and block; nothing else touches the word. */
#include "sleep.h"

int evloop__sleep_init(struct evloop__sleep *s, const char *fence_request, const char **why)
{
    atomic_init(&s->word, EVLOOP__AWAKE);
    int r = evloop__barrier_choose(fence_request, &s->fence, why);
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
    }
}

void evloop__sleep_notify(struct evloop__sleep *s)
{
    /* The light barrier orders the caller's publication before the read of the word;
     * it pairs with the heavy barrier in evloop__sleep_announce(). The relaxed read
     * keeps a busy loop's producers free of read-modify-writes on the word. */
    evloop__barrier_light(s->fence);
    if (atomic_load_explicit(&s->word, memory_order_relaxed) == EVLOOP__AWAKE)
        return;
    /* seq_cst: one exchange wins against the loop's finish and other producers. */
    wake(s, atomic_exchange(&s->word, EVLOOP__AWAKE));
}

void evloop__sleep_kick(struct evloop__sleep *s)
{
    atomic_fetch_add_explicit(&s->epoch, 1, memory_order_relaxed);
    evloop__sleep_notify(s);
}

void evloop__sleep_wake_word(_Atomic uint32_t *word)
{
    /* Only with CAP_WORD_WAKE, which only the futex waker offers: its wake needs no
     * waker state. seq_cst: as in notify; the caller published under a lock before. */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(word, memory_order_relaxed) == EVLOOP__SLEEP_WORD &&
        atomic_exchange(word, EVLOOP__AWAKE) == EVLOOP__SLEEP_WORD)
        evloop__waker_wake(NULL, word);
}

void evloop__sleep_announce(struct evloop__sleep *s, uint32_t value)
{
    atomic_store_explicit(&s->word, value, memory_order_relaxed);
    /* Pairs with the light barrier of every producer (notify, and the ingress's own):
     * after it, either the loop's re-check sees a producer's publication, or that
     * producer sees this value. */
    evloop__barrier_heavy(s->fence);
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
