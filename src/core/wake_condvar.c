/* Portable fast-wake primitive: a mutex and a condition variable (CLOCK_MONOTONIC).
 * Implements wake.h. The loop checks the word under the mutex and the waker takes the
 * mutex after changing the word, so a wake between the check and the wait is not lost. */
#include <pthread.h>
#include <stdlib.h>

#include "common.h"
#include "wake.h"

struct evloop__waker {
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

int evloop__waker_new(struct evloop__waker **out)
{
    struct evloop__waker *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int r = pthread_cond_init(&w->cv, &attr);
    pthread_condattr_destroy(&attr);
    if (r != 0) {
        free(w);
        return -r;
    }
    pthread_mutex_init(&w->mu, NULL);
    *out = w;
    return 0;
}

void evloop__waker_free(struct evloop__waker *w)
{
    if (!w)
        return;
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

int evloop__waker_wait(struct evloop__waker *w, _Atomic uint32_t *word, uint32_t expected,
                       int64_t timeout_ns)
{
    struct timespec deadline = {0};
    if (timeout_ns >= 0)
        deadline = evloop__ns_to_timespec(evloop__clock_ns() + (uint64_t)timeout_ns);
    pthread_mutex_lock(&w->mu);
    /* seq_cst: pairs with the exchange in evloop__wake_loop(); one wait, then re-check. */
    if (atomic_load(word) == expected) {
        if (timeout_ns >= 0)
            pthread_cond_timedwait(&w->cv, &w->mu, &deadline);
        else
            pthread_cond_wait(&w->cv, &w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return 0;
}

void evloop__waker_wake(struct evloop__waker *w, _Atomic uint32_t *word)
{
    (void)word;
    pthread_mutex_lock(&w->mu);
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

const char *evloop__waker_name(void)
{
    return "condvar";
}
