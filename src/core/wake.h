/* The build-time seam for the fast-wake primitive: the loop blocks on a 32-bit word and
 * a producer wakes it. wake_futex.c (Linux), wake_ulock.c (macOS) and wake_condvar.c
 * (portable) implement these symbols; CMake compiles exactly one.
 * The word's values and who stores them: sleep.h, the protocol's one owner. */
#ifndef EVLOOP_WAKE_H
#define EVLOOP_WAKE_H

#include <stdatomic.h>
#include <stdint.h>

struct evloop__waker;

int evloop__waker_new(struct evloop__waker **out);
void evloop__waker_free(struct evloop__waker *w);

/* Loop thread: blocks while *word == expected, at most timeout_ns (-1 = no limit).
 * Returns 0 when woken, on timeout or spuriously; the caller re-checks everything. */
int evloop__waker_wait(struct evloop__waker *w, _Atomic uint32_t *word, uint32_t expected,
                       int64_t timeout_ns);

/* Any thread: wakes the loop blocked on word (after the caller changed *word). The futex
 * waker ignores w (evloop__sleep_wake_word passes NULL). */
void evloop__waker_wake(struct evloop__waker *w, _Atomic uint32_t *word);

/* "futex", "ulock" or "condvar". */
const char *evloop__waker_name(void);

#endif
