/* Fast-wake primitive for Linux: the loop blocks in futex(FUTEX_WAIT_PRIVATE) on its
 * 32-bit sleep word and a producer wakes it with FUTEX_WAKE_PRIVATE. Implements wake.h.
 * The word is the futex, so a wake costs one syscall and needs no other state. */
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common.h"
#include "wake.h"

struct evloop__waker {
    int unused;
};

int evloop__waker_new(struct evloop__waker **out)
{
    *out = calloc(1, sizeof(**out));
    return *out ? 0 : -ENOMEM;
}

void evloop__waker_free(struct evloop__waker *w)
{
    free(w);
}

int evloop__waker_wait(struct evloop__waker *w, _Atomic uint32_t *word, uint32_t expected,
                       int64_t timeout_ns)
{
    (void)w;
    struct timespec ts, *tsp = NULL;
    if (timeout_ns >= 0) {
        ts = evloop__ns_to_timespec((uint64_t)timeout_ns);
        tsp = &ts;
    }
    /* EAGAIN (word already changed), EINTR and ETIMEDOUT all mean: go and re-check. */
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, expected, tsp, NULL, 0);
    return 0;
}

void evloop__waker_wake(struct evloop__waker *w, _Atomic uint32_t *word)
{
    (void)w;
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

const char *evloop__waker_name(void)
{
    return "futex";
}
