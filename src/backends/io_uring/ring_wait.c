/* The io_uring backend's wait (backend.h's wait; io_uring.c is the rest of the backend, and
 * its header the traps cited here): blocks in epoll_pwait2 on the set, with the ring's fd in
 * it, or in the ring, with a POLL_ADD on the set, when ops wait to be submitted; arms the
 * futex wait on the loop's word before it blocks; turns CQEs (ops, the futex, the set's
 * POLL_ADD) and the set's readiness into reports, at most MAX_REPORTS per wait. Loop thread
 * only; a loop run by another thread than before first adopts the ring (trap b). */
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include "backends/epoll/epoll_events.h"
#include "backends/epoll/epoll_wait.h"
#include "common.h"
#include "sleep.h"
#include "uring_state.h"

static void cancel(struct uring *s, unsigned kind)
{
    /* A bounded wait: the request may be completing as task work of a thread that is busy. */
    struct io_uring_sync_cancel_reg reg = {.addr = evloop__uring_udata(s, kind), .timeout = {1, 0}};
    /* -ENOENT: it has ended already; -EINVAL: before Linux 6.0, it stays (trap b). */
    io_uring_register_sync_cancel(&s->ring, &reg);
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
    io_uring_sqe_set_data64(sqe, evloop__uring_udata(s, kind));
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
    int r = evloop__uring_ctl(s, in ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, s->ring.ring_fd, EPOLLIN, RING_TAG);
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

int evloop__uring_wait(void *state, int64_t timeout_ns, struct evloop__io_event *out, int max)
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
        /* seq_cst: pairs with the store in ur_wake() (io_uring.c). */
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
