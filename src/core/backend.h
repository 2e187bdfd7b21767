/* The run-time seam for pollers: one const struct evloop__backend per implementation, in a
 * folder per backend under src/backends/. backend.c holds the facts about every backend in
 * one table (names, implementations, auto's order and why) and the selection rule; the core
 * calls a backend only through its vtable. */
#ifndef EVLOOP_BACKEND_H
#define EVLOOP_BACKEND_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One report of wait(). Readiness: tag as given to add/modify, events as EVLOOP_* bits,
 * res unused. A completion of a native operation (op_start below): events is EVLOOP__EV_OP,
 * tag is (uint64_t)(uintptr_t) of the op, res its result. */
struct evloop__io_event {
    uint64_t tag;
    uint32_t events;
    int64_t res;
};

/* ---- completion operations (evloop_accept/recv/send; the core's side is ops.c) ----
 *
 * A backend may run them natively: it sets op_start and op_cancel (both or neither). When
 * they are NULL the core emulates every operation with add/modify/remove readiness and
 * non-blocking syscalls, so a backend without them loses nothing but speed.
 *
 * The contract of a native backend:
 *  - op_start and op_cancel are called on the loop thread only (inside evloop_run or
 *    evloop_run_once, or by the thread running the loop's final drain), never concurrently
 *    with wait(), and with the core's io_lock held, the lock add/modify/remove are called
 *    under: none of the four runs concurrently with another. They must not block.
 *  - Every op_start that returned 0 gets exactly one completion report from a later wait()
 *    (never from op_start itself): {tag = (uintptr_t)op, events = EVLOOP__EV_OP, res}, also
 *    after op_cancel. Reports of ops are never dropped, merged or re-polled; they count in
 *    wait()'s max like readiness reports, and a wait() that has one to give returns it
 *    without blocking. The backend calls no core function: reports are the only way back.
 *  - The op's memory and d->buf stay valid until its report has been returned; the core
 *    never starts an op twice and never cancels one whose report it has seen.
 *  - res: ACCEPT: the new fd, already O_NONBLOCK and O_CLOEXEC; RECV: bytes read into
 *    d->buf, 1..d->len, 0 when the peer closed; SEND: bytes written, 1..d->len (a short
 *    write is fine: the core starts the rest as a new SEND); or a negative errno (-EAGAIN
 *    is never reported: the backend waits for readiness itself).
 *  - Per fd the core has at most one ACCEPT, one RECV and one SEND started at a time, not
 *    counting ACCEPTs and RECVs already passed to op_cancel (it queues further sends itself,
 *    to keep them in order), and only on fds that are not registered with add() (evloop_io_*
 *    and ops exclude each other per fd).
 *  - The loop sleeps in wait() while any op is started (ops count in the loop's fds).
 * How the backend batches submissions (one io_uring_enter per wait), uses multishot
 * requests or provided buffers behind these calls, is its own business.
 * $EVLOOP_OPS=emulate runs the emulation even where these are set (A/B on one backend);
 * test_ops and stress_ops run every backend in its own mode and in $EVLOOP_OPS=native-sim,
 * where the core plays this contract against its emulation (ops.h). */
struct evloop__op; /* core-owned (ops.c): stable address from op_start until its report */
enum { EVLOOP__OP_ACCEPT = 1, EVLOOP__OP_RECV, EVLOOP__OP_SEND };
struct evloop__op_desc {
    int kind; /* EVLOOP__OP_* */
    int fd;
    void *buf;  /* RECV: where to read; SEND: what to write (cast from const); ACCEPT: NULL */
    size_t len; /* RECV, SEND: > 0; ACCEPT: 0 */
};
#define EVLOOP__EV_OP 0x80000000u /* in evloop__io_event.events: an op's completion */

/* The embedding fd of evloop_backend_fd, made by a backend's pollable_fd (below): a set
 * of the system's poller that the program polls from a loop of its own. Its fds belong to
 * the backend, which closes them in destroy.
 *  fd:       what evloop_backend_fd returns. It polls readable while wake_fd has been
 *            written and not drained since, and, while pollable_watch has put wait()'s
 *            readiness in, while wait() has something to report or a wake is pending.
 *  wake_fd:  write(2) of 8 bytes makes fd readable (EAGAIN: it is already); a bare syscall,
 *            so a signal handler may make it (sleep.c).
 *  drain_fd: one read(2) of up to 64 bytes takes what the writes left (the same fd as
 *            wake_fd for an eventfd; a pipe's read end otherwise). */
struct evloop__pollable {
    int fd, wake_fd, drain_fd;
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
    /* Optional, both or neither (NULL: evloop_backend_fd is -ENOTSUP): the embedding fd
     * (struct evloop__pollable above). pollable_fd makes it into *out, once per loop, on any
     * thread (the core serialises the calls); returns 0, -ENOTSUP (this system cannot poll
     * such an fd) or another -errno. pollable_watch puts wait()'s readiness into that fd
     * (on) or takes it out; loop thread, never concurrently with wait(); returns 0 or
     * -errno. destroy closes the fds. */
    int (*pollable_fd)(void *state, struct evloop__pollable *out);
    int (*pollable_watch)(void *state, bool on);
    /* Optional, both or neither (see "completion operations" above); NULL: the core
     * emulates ops with readiness. Loop thread. op_start: starts op as d describes (d is
     * only read during the call); returns 0 (one report will come) or -errno (none will;
     * the core reports the error to the caller). op_cancel: asks that a started op end
     * soon; its one report still comes, with -ECANCELED or with the result it had reached
     * (the core turns both into -ECANCELED for the caller, closing an accepted fd). Returns
     * 0 or -errno; either way the report still comes. */
    int (*op_start)(void *state, struct evloop__op *op, const struct evloop__op_desc *d);
    int (*op_cancel)(void *state, struct evloop__op *op);
};

/* Called by a backend's init just before it returns -ENOTSUP, on the same thread: what
 * refused it and the errno it got ("io_uring_setup", EPERM), so the fallback reason in
 * evloop_stats() says why. Returns -ENOTSUP. */
int evloop__backend_refused(const char *what, int err);

/* ---- the backends evloop knows, and the choice among them (backend.c) ---- */

/* Backends evloop knows, built here or not: "epoll" 0, "io_uring" 1, "kqueue" 2, the index of
 * evloop_profile.readiness_ns and of evloop_backend_name(). */
#define EVLOOP__BACKENDS 3

/* The index of a backend name (above), or -1 for any other name. */
int evloop__backend_index(const char *name);

struct evloop_profile;

/* What evloop__backend_open started, and why. */
struct evloop__backend_pick {
    const struct evloop__backend *backend;
    void *state;
    unsigned caps;
    char fallback[128]; /* why "auto" did not get its first choice; "" if it did */
    char reason[192];   /* why this backend, and which implementation of it runs */
};

/* Picks and starts a backend. name: NULL or "auto" (then $EVLOOP_BACKEND; then the profile's
 * backend, if profile is not NULL and names one; then auto's order), or a backend name.
 * Returns 0, -EINVAL (unknown name), -ENOTSUP, or -errno; evloop_last_error() says why. */
int evloop__backend_open(const char *name, const struct evloop_profile *profile,
                         _Atomic uint32_t *sleep_word, struct evloop__backend_pick *out);

#endif
