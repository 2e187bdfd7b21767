/* Backend "io_uring" (Linux): registrations are epoll_ctl calls on an epoll set, readiness is
 * epoll's own (level-triggered, each fd checked again as it is handed out, at most once per
 * wait, always harvested with epoll_pwait2), and the ring carries the futex wait on the loop's
 * sleep word (EVLOOP__CAP_WORD_WAKE: producers wake a loop asleep here with the same futex wake
 * as in fast-wake mode) and native ops (native_ops.c). Where the loop cannot sleep on its word,
 * an eventfd in the set wakes it. A wait blocks in epoll_pwait2 (the ring's fd in the set ends
 * it when a CQE comes) unless it has ops to submit: then it blocks in the ring, with a oneshot
 * POLL_ADD on the set saying when the set has something. One syscall per wait either way (two
 * when only a futex wait must be re-armed). Nothing registered: the ring alone. Implements the
 * evloop__backend vtable (backend.h).
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
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backends/epoll/epoll_embed.h"
#include "backends/epoll/epoll_events.h"
#include "backends/epoll/epoll_wait.h"
#include "common.h"
#include "evloop.h"
#include "sleep.h"
#include "uring.h"

#define SQ_ENTRIES 256u
#define CQ_ENTRIES 1024u
#define CQE_BATCH 32u
#define MAX_REPORTS 64 /* reports per wait: what the core asks for (EVLOOP__IO_EVENTS_MAX) */
#define WAKE_TAG UINT64_MAX
#define RING_TAG (UINT64_MAX - 1)

/* user_data of the backend's own requests: kind | generation << 8 (an op's is its address,
 * native_ops.c). A request adopt() cancelled, or could not, may complete after its successor
 * was armed; its older generation marks it. */
enum { K_FUTEX = 1, K_CANCEL = 2, K_SET = 3 };

struct uring {
    struct io_uring ring;
    int epfd;
    int efd; /* the eventfd wake, in the set; -1 when the loop sleeps on its word */
    _Atomic uint32_t *word;
    bool no_pwait2; /* epoll_pwait2 said ENOSYS: epoll_wait (epoll_wait.h) */
    /* fds in the set: written by add and remove (serialised by the core, any thread), read by
     * the loop thread to choose where it blocks (trap i). */
    _Atomic uint32_t nactive;
    /* The loop thread's: what is in flight, and which thread armed it (trap b). fresh: the
     * CQEs reaped now came in this wait's enter, not before it. */
    bool fresh;
    bool set_armed, set_ready; /* a POLL_ADD on the set is in flight; one said "look" */
    uint32_t queued_ops;       /* op starts and cancels queued since the last submission */
    bool ring_in_set;          /* the ring's fd is in the set (traps g and h) */
    uint64_t gen;
    pthread_t armed_by;
    pthread_mutex_t lock;     /* pollset */
    int pollset;              /* epfd and the ring's fd, nested in embed; -1 until asked */
    struct evloop__pollable embed; /* evloop_backend_fd's, once made (epoll_embed.h) */
    atomic_bool futex_armed;  /* also read by remove and destroy */
    atomic_bool wake_pending; /* word mode: wake() asked the next wait not to block */
    struct epoll_event events[MAX_REPORTS];
};

static int ctl(struct uring *s, int op, int fd, uint32_t events, uint64_t tag)
{
    struct epoll_event ev = {.events = events, .data.u64 = tag};
    return epoll_ctl(s->epfd, op, fd, &ev) < 0 ? -errno : 0;
}

static uint64_t udata(const struct uring *s, unsigned kind)
{
    return s->gen << 8 | kind;
}

static void cancel(struct uring *s, unsigned kind)
{
    /* A bounded wait: the request may be completing as task work of a thread that is busy. */
    struct io_uring_sync_cancel_reg reg = {.addr = udata(s, kind), .timeout = {1, 0}};
    /* -ENOENT: it has ended already; -EINVAL: before Linux 6.0, it stays (trap b). */
    io_uring_register_sync_cancel(&s->ring, &reg);
}

/* Any thread: ends a futex wait the ring may still have armed on the word (trap c). Waking
 * every waiter also wakes the loop if it sleeps there itself; it then re-checks, no harm. */
static void unpark_futex(struct uring *s)
{
    if (atomic_load_explicit(&s->futex_armed, memory_order_relaxed))
        syscall(SYS_futex, (uint32_t *)s->word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Loop thread: turns n events epoll_pwait2 harvested (or -errno) into reports after the k in
 * out[]; returns the new count. */
static int harvest(struct uring *s, int n, struct evloop__io_event *out, int k, int max,
                   bool *woken)
{
    if (n < 0)
        return n == -EINTR ? k : n;
    for (int i = 0; i < n && i < MAX_REPORTS; i++) {
        uint64_t tag = s->events[i].data.u64;
        if (tag == WAKE_TAG) {
            uint64_t v;
            ssize_t rd = read(s->efd, &v, sizeof(v)); /* a non-blocking drain */
            (void)rd;
            *woken = true;
        } else if (tag != RING_TAG && k < max) { /* past max: reported again next wait */
            out[k++] = (struct evloop__io_event){tag, evloop__from_epoll(s->events[i].events), 0};
        }
    }
    return k;
}

/* Loop thread: one CQE; out[] has room for one more report. */
static int handle(struct uring *s, const struct io_uring_cqe *cqe, struct evloop__io_event *out,
                  int k, int max, bool *woken)
{
    if (evloop__uring_op_report(cqe, &out[k])) /* never stale: a completion is final */
        return k + 1;
    if (cqe->user_data >> 8 != s->gen)
        return k; /* armed before adopt() (trap b) */
    switch (cqe->user_data & 0xff) {
    case K_FUTEX:
        atomic_store_explicit(&s->futex_armed, false, memory_order_relaxed);
        *woken |= s->fresh; /* before the enter: the late echo of a wake the word handled */
        return k;
    case K_SET:
        s->set_armed = false;
        s->set_ready = true; /* a hint only (trap a): the next harvest looks */
        return k;
    }
    return k; /* K_CANCEL: its op had completed already; the op's own CQE reports it */
}

/* Loop thread: takes the CQEs there are (flushing an overflow, trap f) while out[] has room.
 * Returns the new count of reports, or -errno. */
static int reap(struct uring *s, struct evloop__io_event *out, int k, int max, bool *woken)
{
    struct io_uring_cqe *cqes[CQE_BATCH];
    unsigned n;
    while (k >= 0 && k < max && (n = io_uring_peek_batch_cqe(&s->ring, cqes, CQE_BATCH)) > 0) {
        unsigned i = 0;
        for (; i < n && k >= 0 && k < max; i++)
            k = handle(s, cqes[i], out, k, max, woken);
        io_uring_cq_advance(&s->ring, i);
    }
    return k;
}

/* Loop thread: the requests in flight were armed by another thread (trap b); end them, so
 * this one arms its own. Ops go on; their CQEs come from the other thread's task work. */
static void adopt(struct uring *s, pthread_t self)
{
    if (atomic_load_explicit(&s->futex_armed, memory_order_relaxed))
        cancel(s, K_FUTEX);
    if (s->set_armed)
        cancel(s, K_SET);
    s->set_armed = false;
    s->set_ready = true;
    atomic_store_explicit(&s->futex_armed, false, memory_order_relaxed);
    s->gen++;
    s->armed_by = self;
}

/* Loop thread: queues one of the backend's own requests; false when the SQ has no room. */
static bool queue(struct uring *s, unsigned kind)
{
    struct io_uring_sqe *sqe = evloop__uring_get_sqe(&s->ring);
    if (!sqe)
        return false;
    if (kind == K_FUTEX)
        evloop__uring_prep_futex(sqe, s->word, EVLOOP__SLEEP_WORD);
    else
        io_uring_prep_poll_add(sqe, s->epfd, POLLIN);
    io_uring_sqe_set_data64(sqe, udata(s, kind));
    return true;
}

/* Loop thread: queues the futex wait when about to block on the word; clears *block when it
 * cannot. */
static void arm(struct uring *s, bool *block)
{
    if (*block && s->efd < 0 && !atomic_load_explicit(&s->futex_armed, memory_order_relaxed)) {
        bool armed = queue(s, K_FUTEX);
        atomic_store_explicit(&s->futex_armed, armed, memory_order_relaxed);
        *block = armed;
    }
}

static int enter_result(int r)
{
    return r >= 0 || r == -ETIME || r == -EINTR || r == -EAGAIN || r == -EBUSY ? 0 : r;
}

/* Loop thread: submits what is queued and runs this thread's task work; if block, waits for
 * one CQE, at most timeout_ns (-1: no limit). Relative and in ns: never early. */
static int enter(struct uring *s, bool block, int64_t timeout_ns)
{
    struct io_uring_cqe *cqe;
    struct __kernel_timespec ts = {timeout_ns / 1000000000, timeout_ns % 1000000000};
    if (!block && !io_uring_sq_ready(&s->ring))
        return 0; /* a poll with nothing to submit: reap() runs pending task work */
    return enter_result(!block ? io_uring_submit_and_get_events(&s->ring)
                        : timeout_ns < 0
                            ? io_uring_submit_and_wait(&s->ring, 1)
                            : io_uring_submit_and_wait_timeout(&s->ring, &cqe, 1, &ts, NULL));
}

/* Loop thread: harvests the set with epoll_pwait2, blocking up to timeout_ns if block.
 * Without a block, a POLL_ADD on the set still in flight means nothing is there. Returns the
 * new count of reports in out[], or -errno. */
static int harvest_set(struct uring *s, bool block, int64_t timeout_ns,
                       struct evloop__io_event *out, int k, int max, bool *woken)
{
    if (k >= max || (!block && s->set_armed && !s->set_ready))
        return k;
    s->set_ready = false;
    int n =
        evloop__epoll_wait_ns(s->epfd, s->events, max - k, block ? timeout_ns : 0, &s->no_pwait2);
    return harvest(s, n < 0 ? -errno : n, out, k, max, woken);
}

/* Loop thread: puts the ring's fd in the set or takes it out (traps g and h). */
static int ring_in_set(struct uring *s, bool in)
{
    if (s->ring_in_set == in)
        return 0;
    int r = ctl(s, in ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, s->ring.ring_fd, EPOLLIN, RING_TAG);
    s->ring_in_set = r == 0 ? in : s->ring_in_set;
    return r;
}

/* Loop thread: submits what is queued, then harvests the set, blocking there if block, with
 * the ring's fd in it (trap g). */
static int wait_in_set(struct uring *s, bool block, int64_t timeout_ns,
                       struct evloop__io_event *out, int k, int max, bool *woken)
{
    int r = io_uring_sq_ready(&s->ring) ? enter_result(io_uring_submit(&s->ring)) : 0;
    if (r == 0 && block)
        r = ring_in_set(s, true);
    if (r < 0)
        return r;
    k = harvest_set(s, block, timeout_ns, out, k, max, woken);
    return k < 0 ? k : reap(s, out, k, max, woken); /* what ended the epoll_pwait2 */
}

/* Loop thread, with ops to submit: waits in the ring, with a POLL_ADD on the set to end the
 * block when the set has something (and the ring's fd out of it, trap h), then harvests the
 * set if it said so. */
static int wait_in_ring(struct uring *s, bool block, int64_t timeout_ns,
                        struct evloop__io_event *out, int k, int max, bool *woken)
{
    if (block && !s->set_armed)
        s->set_armed = queue(s, K_SET);
    if (block && (!s->set_armed || ring_in_set(s, false) < 0)) /* block in the set instead */
        return wait_in_set(s, true, timeout_ns, out, k, max, woken);
    int r = enter(s, block, timeout_ns);
    if (r < 0)
        return r;
    k = reap(s, out, k, max, woken);
    return k < 0 ? k : harvest_set(s, false, 0, out, k, max, woken);
}

static int ur_wait(void *state, int64_t timeout_ns, struct evloop__io_event *out, int max)
{
    struct uring *s = state;
    pthread_t self = pthread_self();
    if (!pthread_equal(self, s->armed_by))
        adopt(s, self);
    max = max < MAX_REPORTS ? max : MAX_REPORTS;
    uint64_t deadline = evloop__clock_ns() + (uint64_t)(timeout_ns > 0 ? timeout_ns : 0);
    for (;;) {
        /* What completed while the loop was away: not fresh (handle()). */
        bool woken = false;
        s->fresh = false;
        int k = reap(s, out, 0, max, &woken);
        /* seq_cst: pairs with the store in ur_wake(). */
        bool block = timeout_ns != 0 && k == 0 &&
                     !(atomic_load(&s->wake_pending) && atomic_exchange(&s->wake_pending, false));
        arm(s, &block);
        s->fresh = true;
        if (k < 0)
            return k;
        bool set_empty = atomic_load_explicit(&s->nactive, memory_order_relaxed) == 0;
        if (set_empty && s->efd < 0) { /* the ring alone */
            int r = enter(s, block, timeout_ns);
            k = r < 0 ? r : reap(s, out, k, max, &woken);
        } else if (s->queued_ops) {
            s->queued_ops = 0;
            k = wait_in_ring(s, block, timeout_ns, out, k, max, &woken);
        } else {
            k = wait_in_set(s, block, timeout_ns, out, k, max, &woken);
        }
        if (k != 0 || woken || !block)
            return k;
        /* A timeout, or only an empty harvest: wait again, for what is left of the timeout. */
        uint64_t now = evloop__clock_ns();
        if (timeout_ns > 0 && now >= deadline)
            return 0;
        timeout_ns = timeout_ns > 0 ? (int64_t)(deadline - now) : timeout_ns;
    }
}

static int ur_add(void *state, int fd, uint32_t events, uint64_t tag)
{
    struct uring *s = state;
    int r = ctl(s, EPOLL_CTL_ADD, fd, evloop__to_epoll(events), tag);
    /* relaxed: ordered against the loop's announce by sleep_wake_word's fence (trap i). */
    if (r == 0 && atomic_fetch_add_explicit(&s->nactive, 1, memory_order_relaxed) == 0 &&
        s->efd < 0)
        evloop__sleep_wake_word(s->word);
    return r;
}

static int ur_modify(void *state, int fd, uint32_t events, uint64_t tag)
{
    return ctl(state, EPOLL_CTL_MOD, fd, evloop__to_epoll(events), tag);
}

static int ur_remove(void *state, int fd)
{
    struct uring *s = state;
    int r = ctl(s, EPOLL_CTL_DEL, fd, 0, 0);
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
    atomic_store(&s->wake_pending, true); /* seq_cst: pairs with the exchange in ur_wait() */
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
    return s->efd < 0 ? -errno : ctl(s, EPOLL_CTL_ADD, s->efd, EPOLLIN, WAKE_TAG);
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
    int r = evloop__uring_op_cancel(&s->ring, op, udata(s, K_CANCEL));
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
    .wait = ur_wait,
    .wake = ur_wake,
    .pollable_fd = ur_pollable_fd,
    .pollable_watch = ur_pollable_watch,
    .op_start = ur_op_start,
    .op_cancel = ur_op_cancel,
};
