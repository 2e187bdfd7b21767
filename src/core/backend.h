/* The run-time seam for pollers: one const struct evloop__backend per backend, each in
 * its own folder under src/backends/. backend.c holds the candidate list in priority
 * order and the selection rule; the core calls a backend only through this table. */
#ifndef EVLOOP_BACKEND_H
#define EVLOOP_BACKEND_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* One readiness report: tag as given to add/modify, events as EVLOOP_* bits. */
struct evloop__io_event {
    uint64_t tag;
    uint32_t events;
};

enum {
    /* wait() also returns when the loop's sleep word is woken by evloop__waker_wake(),
     * so the loop sleeps in the poller with EVLOOP__SLEEP_WORD and producers wake it
     * with the same call as in fast-wake mode (io_uring's futex wait, futex waker only). */
    EVLOOP__CAP_WORD_WAKE = 1u,
};

struct evloop__backend {
    const char *name;
    /* Creates the poller and sets *caps (EVLOOP__CAP_* bits it can offer on this
     * machine). sleep_word is the loop's wake word (for CAP_WORD_WAKE).
     * Returns 0, -ENOTSUP when this backend cannot run here, or another -errno. */
    int (*init)(void **state, _Atomic uint32_t *sleep_word, unsigned *caps);
    void (*destroy)(void *state);
    /* add/modify/remove: the core serialises these calls; wait and wake may run
     * concurrently with them. events are EVLOOP_READABLE | EVLOOP_WRITABLE. */
    int (*add)(void *state, int fd, uint32_t events, uint64_t tag);
    int (*modify)(void *state, int fd, uint32_t events, uint64_t tag);
    int (*remove)(void *state, int fd);
    /* Loop thread: waits up to timeout_ns (-1 = no limit, 0 = poll) and fills ev with at
     * most max reports. Returns the count (0 on timeout or wake) or -errno; never -EINTR. */
    int (*wait)(void *state, int64_t timeout_ns, struct evloop__io_event *ev, int max);
    /* Any thread: makes a wait in progress (or the next one) return. */
    int (*wake)(void *state);
};

/* Called by a backend's init just before it returns -ENOTSUP, on the same thread: what
 * refused it and the errno it got ("io_uring_setup", EPERM), so the fallback reason in
 * evloop_stats() says why. Returns -ENOTSUP. */
int evloop__backend_refused(const char *what, int err);

/* Picks and starts a backend. name: NULL or "auto" (then $EVLOOP_BACKEND, then the
 * candidate list), or a backend name. fallback receives why auto skipped a candidate
 * ("" if it did not). Returns 0, -EINVAL (unknown name), -ENOTSUP, or -errno. */
int evloop__backend_open(const char *name, _Atomic uint32_t *sleep_word,
                         const struct evloop__backend **out, void **state, unsigned *caps,
                         char *fallback, size_t fallback_len);

#endif
