/* Backend "io_uring" (Linux): registrations are epoll_ctl calls on an epoll set, readiness is
 * epoll's own (level-triggered, each fd checked again as it is handed out, at most once per
 * wait, always harvested with epoll_pwait2), and the ring carries the futex wait on the loop's
 * sleep word (EVLOOP__CAP_WORD_WAKE: producers wake a loop asleep here with the same futex wake
 * as in fast-wake mode) and native ops (native_ops.c). Where the loop cannot sleep on its word,
 * an eventfd in the set wakes it. A wait blocks in epoll_pwait2 (the ring's fd in the set ends
 * it when a CQE comes) unless it has ops to submit: then it blocks in the ring, with a oneshot
 * POLL_ADD on the set saying when the set has something. One syscall per wait either way (two
 * when only a futex wait must be re-armed). Nothing registered: the ring alone. Implements the
 * evloop__backend vtable (backend.h): registrations, wakes, init and destroy, ops and the
 * pollable fd here; the wait in ring_wait.c; the state both share in uring_state.h.
 *
 * Kernels (probe.c finds out; docs/design.md, "Backends"): Linux 5.18 at least, for
 * IORING_SETUP_SUBMIT_ALL; an older one refuses io_uring_setup (EINVAL; ENOSYS before 5.1),
 * init returns -ENOTSUP and the loop starts on epoll (tests/backend/test_fallback.c). Found at
 * init, not needed: COOP_TASKRUN (5.19), IORING_REGISTER_SYNC_CANCEL (6.0, trap b),
 * IORING_OP_FUTEX_WAIT (6.7; else the eventfd wake), epoll_pwait2 (5.11; else epoll_wait).
 *
 * Traps of the OS API:
 *  a. A CQE of the POLL_ADD on the set says only "look": it may be stale by the time the loop
 *     reads it (task work runs at any return to user mode), so it leads to an epoll_pwait2,
 *     never to a report. Registrations are level-triggered: nothing is lost.
 *  b. Task work runs on the submitting thread. A loop run by another thread than before
 *     (evloop_run_once) cancels what the old one armed, synchronously, and arms its own; a
 *     request it could not cancel (before Linux 6.0) completes with an older generation in
 *     its user_data, and is dropped.
 *  c. A futex wait left armed takes a FUTEX_WAKE of one waiter meant for the loop asleep in
 *     fast-wake mode (or for a later loop at the same address): removing the last fd, and
 *     destroy, wake every waiter on the word, which any thread may do without the ring.
 *  d. After a fork the epoll set is the parent's too: destroy leaves it alone, since removing
 *     the eventfd would take the parent's wake away (stress_fork, the child that frees its
 *     copy of the parent's loop).
 *  e. epoll registers open file descriptions: EPOLL_CTL_DEL of an fd closed meanwhile fails
 *     with EBADF or ENOENT, which means it is gone already.
 *  f. A CQ that overflowed keeps the rest in the kernel (IORING_FEAT_NODROP) until an enter
 *     flushes it; io_uring_peek_batch_cqe flushes (and runs pending task work: TASKRUN_FLAG).
 *  g. A CQE can be posted between the last look at the CQ and epoll_pwait2: task work runs at
 *     any return to user mode, an interrupt's too, and then leaves no signal pending to end
 *     the wait. The ring's fd is in the set whenever the loop blocks in epoll_pwait2 (found
 *     by stress_fdreuse: a wake lost about once in 40 runs without it).
 *  h. But while the loop waits in the ring, the set must not hold the ring's fd: a CQE would
 *     fire the POLL_ADD on the set at every completion. The fd goes in and out of the set
 *     when the loop changes where it blocks (ops started or not). The pollable fd
 *     (evloop_backend_fd) is a second set holding the set and the ring's fd.
 *  i. A loop blocked in the ring alone (no fd in the set, native ops in flight) does not see
 *     an fd added from another thread while the core's fd count was already non-zero (ops
 *     count there too): the first add wakes the word, as a producer would (sleep.h). */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backends/epoll/epoll_events.h"
#include "common.h"
#include "evloop.h"
#include "sleep.h"
#include "uring_state.h"

/* Any thread: ends a futex wait the ring may still have armed on the word (trap c). Waking
 * every waiter also wakes the loop if it sleeps there itself; it then re-checks, no harm. */
static void unpark_futex(struct uring *s)
{
    if (atomic_load_explicit(&s->futex_armed, memory_order_relaxed))
        syscall(SYS_futex, (uint32_t *)s->word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static int ur_add(void *state, int fd, uint32_t events, uint64_t tag)
{
    struct uring *s = state;
    int r = evloop__uring_ctl(s, EPOLL_CTL_ADD, fd, evloop__to_epoll(events), tag);
    /* relaxed: ordered against the loop's announce by sleep_wake_word's fence (trap i). */
    if (r == 0 && atomic_fetch_add_explicit(&s->nactive, 1, memory_order_relaxed) == 0 &&
        s->efd < 0)
        evloop__sleep_wake_word(s->word);
    return r;
}

static int ur_modify(void *state, int fd, uint32_t events, uint64_t tag)
{
    return evloop__uring_ctl(state, EPOLL_CTL_MOD, fd, evloop__to_epoll(events), tag);
}

static int ur_remove(void *state, int fd)
{
    struct uring *s = state;
    int r = evloop__uring_ctl(s, EPOLL_CTL_DEL, fd, 0, 0);
    uint32_t n = atomic_load_explicit(&s->nactive, memory_order_relaxed);
    atomic_store_explicit(&s->nactive, n - (n > 0), memory_order_relaxed);
    if (n == 1)
        unpark_futex(s);
    return r == -EBADF || r == -ENOENT ? 0 : r; /* trap e */
}

static int ur_wake(void *state)
{
    struct uring *s = state;
    if (s->efd >= 0) {
        uint64_t one = 1;
        /* EAGAIN: the counter is already non-zero, so the loop will wake anyway. */
        return write(s->efd, &one, sizeof(one)) < 0 && errno != EAGAIN ? -errno : 0;
    }
    atomic_store(&s->wake_pending, true); /* seq_cst: pairs with the exchange in evloop__uring_wait() */
    evloop__sleep_wake_word(s->word);
    return 0;
}

static void free_state(struct uring *s)
{
    evloop__epoll_embed_close(&s->embed);
    if (s->pollset >= 0)
        close(s->pollset);
    if (s->efd >= 0)
        close(s->efd);
    if (s->epfd >= 0)
        close(s->epfd);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* The wake: the loop's word when it can sleep there in the ring, else an eventfd in the set. */
static int setup_wake(struct uring *s, unsigned *caps)
{
    if (evloop__uring_can_wait_on_word()) {
        *caps = EVLOOP__CAP_WORD_WAKE;
        return 0;
    }
    *caps = 0;
    s->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    return s->efd < 0 ? -errno : evloop__uring_ctl(s, EPOLL_CTL_ADD, s->efd, EPOLLIN, WAKE_TAG);
}

static int ur_init(void **out, _Atomic uint32_t *word, unsigned *caps)
{
    struct uring *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->word = word;
    s->efd = s->pollset = -1;
    evloop__epoll_embed_clear(&s->embed);
    pthread_mutex_init(&s->lock, NULL);
    s->armed_by = pthread_self();
    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    int r = s->epfd < 0 ? -errno : setup_wake(s, caps);
    if (r == 0)
        r = evloop__uring_start(&s->ring, SQ_ENTRIES, evloop__uring_cq_entries(CQ_ENTRIES));
    if (r < 0) {
        free_state(s);
        return r;
    }
    *out = s;
    return 0;
}

static void ur_destroy(void *state)
{
    struct uring *s = state;
    unpark_futex(s); /* trap c */
    io_uring_queue_exit(&s->ring);
    free_state(s); /* closes the set, never empties it (trap d) */
}

/* Loop thread (backend.h's op contract): queued now, submitted by the next wait's enter. */
static int ur_op_start(void *state, struct evloop__op *op, const struct evloop__op_desc *d)
{
    struct uring *s = state;
    int r = evloop__uring_op_start(&s->ring, op, d);
    s->queued_ops += r == 0;
    return r;
}

static int ur_op_cancel(void *state, struct evloop__op *op)
{
    struct uring *s = state;
    int r = evloop__uring_op_cancel(&s->ring, op, evloop__uring_udata(s, K_CANCEL));
    s->queued_ops += r == 0;
    return r;
}

/* Any thread: a set readable when an fd is ready or a CQE waits (trap h), made at the first
 * call (nesting the set costs every readiness event a wake-up more). Without one, the set. */
static int own_pollable_fd(struct uring *s)
{
    pthread_mutex_lock(&s->lock);
    if (s->pollset < 0) {
        int fd = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event set = {.events = EPOLLIN}, ring = {.events = EPOLLIN};
        if (fd >= 0 && (epoll_ctl(fd, EPOLL_CTL_ADD, s->epfd, &set) < 0 ||
                        epoll_ctl(fd, EPOLL_CTL_ADD, s->ring.ring_fd, &ring) < 0)) {
            close(fd);
            fd = -1;
        }
        s->pollset = fd;
    }
    int fd = s->pollset >= 0 ? s->pollset : s->epfd;
    pthread_mutex_unlock(&s->lock);
    return fd;
}

/* evloop_backend_fd: a set of its own (epoll_embed.h), which own_pollable_fd(), made now,
 * joins while the core has it watch. */
static int ur_pollable_fd(void *state, struct evloop__pollable *out)
{
    struct uring *s = state;
    own_pollable_fd(s);
    return evloop__epoll_embed_open(&s->embed, out);
}

/* The core's park, after pollable_fd returned (so pollset is read without the lock). */
static int ur_pollable_watch(void *state, bool on)
{
    struct uring *s = state;
    return evloop__epoll_embed_watch(&s->embed, s->pollset >= 0 ? s->pollset : s->epfd, on);
}

const struct evloop__backend evloop__backend_io_uring = {
    .name = "io_uring",
    .init = ur_init,
    .destroy = ur_destroy,
    .add = ur_add,
    .modify = ur_modify,
    .remove = ur_remove,
    .wait = evloop__uring_wait,
    .wake = ur_wake,
    .pollable_fd = ur_pollable_fd,
    .pollable_watch = ur_pollable_watch,
    .op_start = ur_op_start,
    .op_cancel = ur_op_cancel,
};
