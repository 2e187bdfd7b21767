/* The build-time seam for the fast-wake primitive: the loop blocks on a 32-bit word and
 * a producer wakes it. wake_futex.c (Linux), wake_ulock.c (macOS) and wake_condvar.c
 * (portable) implement these symbols; CMake compiles exactly one.
 *
 * The sleep word holds one of the values below. Only the loop stores a SLEEP_* value;
 * a producer that sees one flips the word back to AWAKE with an exchange and, if it did
 * the flip, makes the wake call that matches the value it replaced. */
#ifndef EVLOOP_WAKE_H
#define EVLOOP_WAKE_H

#include <stdatomic.h>
#include <stdint.h>

enum {
    EVLOOP__AWAKE = 0,        /* loop is running, or about to re-check its queues */
    EVLOOP__SLEEP_WORD = 1,   /* loop waits on the word (futex / ulock / condvar) */
    EVLOOP__SLEEP_POLLER = 2, /* loop waits in the poller; wake it with backend->wake */
};

struct evloop__waker;

int evloop__waker_new(struct evloop__waker **out);
void evloop__waker_free(struct evloop__waker *w);

/* Loop thread: blocks while *word == expected, at most timeout_ns (-1 = no limit).
 * Returns 0 when woken, on timeout or spuriously; the caller re-checks everything. */
int evloop__waker_wait(struct evloop__waker *w, _Atomic uint32_t *word, uint32_t expected,
                       int64_t timeout_ns);

/* Any thread: wakes the loop blocked on word (after the caller changed *word). */
void evloop__waker_wake(struct evloop__waker *w, _Atomic uint32_t *word);

/* "futex", "ulock" or "condvar". */
const char *evloop__waker_name(void);

#endif
