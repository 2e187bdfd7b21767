/* Backend "io_uring" on kernels without IORING_OP_EPOLL_WAIT (the fallback of ewait.c): fd
 * readiness with multishot polls, and the unified wait: where the futex waker and
 * IORING_OP_FUTEX_WAIT allow it (probe.c), the wait arms a futex wait on the loop's sleep word
 * (EVLOOP__CAP_WORD_WAKE), so a producer wakes a loop asleep here with the same futex wake as
 * in fast-wake mode; elsewhere an eventfd read on the ring wakes it. Implements the
 * evloop__backend vtable (backend.h). Its poll(2) per wait makes it lose epoll's fd round trip
 * by 2-5x, so "auto" never picks it (backend.c).
 *
 * Traps of the OS API:
 *  a. A request's completions run as task work of the thread that submitted it, so only the
 *     loop thread (in wait) touches the SQ, with no lock. add and modify only mark the fd
 *     table (under the lock) and wake the loop, which arms in its next wait; remove cancels
 *     at once with IORING_REGISTER_SYNC_CANCEL, which needs no SQ.
 *  b. A multishot poll reports wake-ups, not "still ready": a reported fd gets a poll update
 *     in the next wait, after its callback ran, which re-checks it (epoll's level semantics).
 *     And a CQE may report readiness a callback has consumed since: a wake-up's mask is posted
 *     without a re-poll, and a waker can be late (a writer preempted between its copy and its
 *     wake-up). As epoll re-polls what it hands out, each wait checks its reports with one
 *     poll(2), and drops those no longer true.
 *  c. The kernel ends a multishot (no IORING_CQE_F_MORE; the mask still counts) when the CQ
 *     is full, and keeps overflowing CQEs (IORING_FEAT_NODROP) until the CQ has room: the fd
 *     is re-armed. Only when it cannot allocate does it drop CQEs: -EBADR, a poller failure.
 *  d. CQEs of a removed or re-added fd may still be queued: user_data carries the
 *     registration's number, and a CQE with another number than the fd's is dropped.
 *  e. A poll holds its file: an fd closed without evloop_io_remove stays open in the kernel.
 *  f. A remove racing an add queued but not yet submitted would cancel nothing and leak the
 *     poll: adds are submitted under the lock.
 *  g. A futex wait left armed takes the FUTEX_WAKE (one waiter) meant for the loop asleep in
 *     fast-wake mode, or for a later loop at the same address: removing the last fd and
 *     destroy cancel it. */
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend.h"
#include "common.h"
#include "evloop.h"
#include "sleep.h"
#include "uring.h"

#define CQE_BATCH 32u
#define MAX_REPORTS 64 /* reports per wait: what the core asks for (EVLOOP__IO_EVENTS_MAX) */

enum { K_POLL = 1, K_UPDATE, K_FUTEX, K_WAKE }; /* user_data: kind << 56 | seq << 32 | fd */
enum { FREE, IDLE, ARMED }; /* not registered; registered, no poll in the kernel; polled */

struct reg {
    uint64_t tag;
    uint32_t events, seq, batch; /* batch: the dispatch that last reported it, at out[slot] */
    int slot, next_dirty;
    uint8_t state;
    bool arm, update, dirty; /* wants a poll add / a poll update; is on the dirty stack */
};

struct uring {
    struct io_uring ring;
    pthread_mutex_t lock; /* regs, dirty, nactive, futex_armed */
    struct reg *regs;
    int cap, dirty; /* dirty: the first fd whose reg wants an SQE, -1 when none */
    uint32_t nactive, seq, batch;
    bool futex_armed, read_armed;
    int efd; /* the eventfd wake, -1 when the loop sleeps on its word */
    uint64_t efd_buf;
    _Atomic uint32_t *word;
    atomic_bool wake_pending; /* word mode: wake() asked the next wait not to block */
};

static uint64_t udata(unsigned kind, uint32_t seq, int fd)
{
    return (uint64_t)kind << 56 | (uint64_t)(seq & 0xffffffu) << 32 | (uint32_t)fd;
}

static unsigned to_poll(uint32_t events)
{
    return (events & EVLOOP_READABLE ? POLLIN | POLLRDHUP : 0u) |
           (events & EVLOOP_WRITABLE ? POLLOUT : 0u);
}

static uint32_t from_poll(uint32_t m)
{
    return (m & (POLLIN | POLLRDHUP) ? EVLOOP_READABLE : 0u) |
           (m & POLLOUT ? EVLOOP_WRITABLE : 0u) | (m & (POLLHUP | POLLRDHUP) ? EVLOOP_HANGUP : 0u) |
           (m & (POLLERR | POLLNVAL) ? EVLOOP_ERROR : 0u);
}

static void cancel(struct uring *s, uint64_t ud)
{
    struct io_uring_sync_cancel_reg reg = {.addr = ud, .timeout = {-1, -1}};
    io_uring_register_sync_cancel(&s->ring, &reg); /* -ENOENT: it has ended already */
}

/* Under the lock: fd's reg wants a poll add (arm) or a poll update in the next wait. */
static void mark(struct uring *s, int fd, bool arm)
{
    struct reg *g = &s->regs[fd];
    g->arm |= arm;
    g->update |= !arm;
    if (!g->dirty) {
        g->dirty = true;
        g->next_dirty = s->dirty;
        s->dirty = fd;
    }
}

static int write_eventfd(struct uring *s)
{
    uint64_t one = 1;
    return write(s->efd, &one, sizeof(one)) < 0 ? -errno : 0;
}

/* Makes a loop asleep in wait() come back to arm what the table now asks for (trap a). On
 * its word, as a producer would (submit.c): the futex wait is submitted after apply() and must
 * find the word changed. On the eventfd, whose count stays set, a write is enough. */
static void kick(struct uring *s)
{
    if (s->efd < 0) {
        evloop__sleep_wake_word(s->word); /* the protocol's word branch (sleep.h) */
        return;
    }
    /* seq_cst: the fence orders the table change (under the lock) before the read; the
     * eventfd's count stays set, so a write made while the loop is awake is not lost. */
    evloop__fence();
    if (atomic_load_explicit(s->word, memory_order_relaxed) == EVLOOP__SLEEP_POLLER)
        write_eventfd(s);
}

/* Loop thread: an SQE; when the SQ is full, submits what is queued to make room. */
static struct io_uring_sqe *get_sqe(struct uring *s)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring);
    if (!sqe && io_uring_submit(&s->ring) >= 0)
        sqe = io_uring_get_sqe(&s->ring);
    return sqe;
}

/* Loop thread, under the lock: queues the SQE reg g of fd wants; false when there is none. */
static bool queue_poll(struct uring *s, int fd, struct reg *g, bool *added)
{
    struct io_uring_sqe *sqe = get_sqe(s);
    if (!sqe)
        return false;
    if (g->state == IDLE) {
        io_uring_prep_poll_multishot(sqe, fd, to_poll(g->events));
        io_uring_sqe_set_data64(sqe, udata(K_POLL, g->seq, fd));
        g->state = ARMED;
        *added = true;
    } else {
        io_uring_prep_poll_update(sqe, udata(K_POLL, g->seq, fd), 0, to_poll(g->events),
                                  IORING_POLL_UPDATE_EVENTS | IORING_POLL_ADD_MULTI);
        io_uring_sqe_set_data64(sqe, udata(K_UPDATE, g->seq, fd));
        sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
    }
    return true;
}

/* Loop thread: queues what the table asks for (adds submitted at once, trap f) and, when
 * about to block, the wake-up request. Clears *block when it cannot arm one. */
static int apply(struct uring *s, bool *block)
{
    bool added = false;
    pthread_mutex_lock(&s->lock);
    for (; s->dirty >= 0; s->dirty = s->regs[s->dirty].next_dirty) {
        struct reg *g = &s->regs[s->dirty];
        bool want = g->state == IDLE ? g->arm : g->state == ARMED && g->update;
        if (want && !queue_poll(s, s->dirty, g, &added))
            break;
        g->arm = g->update = g->dirty = false;
    }
    int r = added ? io_uring_submit(&s->ring) : 0;
    bool *armed = s->efd < 0 ? &s->futex_armed : &s->read_armed;
    struct io_uring_sqe *sqe = *block && !*armed ? get_sqe(s) : NULL;
    if (sqe && s->efd < 0)
        evloop__uring_prep_futex(sqe, s->word, EVLOOP__SLEEP_WORD);
    else if (sqe)
        io_uring_prep_read(sqe, s->efd, &s->efd_buf, sizeof(s->efd_buf), 0);
    if (sqe)
        io_uring_sqe_set_data64(sqe, udata(s->efd < 0 ? K_FUTEX : K_WAKE, 0, 0));
    *armed |= sqe != NULL;
    *block = *block && *armed;
    pthread_mutex_unlock(&s->lock);
    return r < 0 && r != -EAGAIN && r != -EBUSY ? r : 0;
}

/* Loop thread: submits what apply() queued and, if block, waits for one CQE, at most
 * timeout_ns (-1: no limit). The timeout is relative and in ns: never early. */
static int enter(struct uring *s, bool block, int64_t timeout_ns)
{
    struct io_uring_cqe *cqe;
    struct __kernel_timespec ts = {timeout_ns / 1000000000, timeout_ns % 1000000000};
    int r = !block           ? (io_uring_sq_ready(&s->ring) ? io_uring_submit(&s->ring) : 0)
            : timeout_ns < 0 ? io_uring_submit_and_wait(&s->ring, 1)
                             : io_uring_submit_and_wait_timeout(&s->ring, &cqe, 1, &ts, NULL);
    return r >= 0 || r == -ETIME || r == -EINTR || r == -EAGAIN || r == -EBUSY ? 0 : r;
}

/* Under the lock: takes one CQE into out[], which holds k reports; returns the new count. */
static int handle(struct uring *s, const struct io_uring_cqe *cqe, struct evloop__io_event *out,
                  int k, bool *woken)
{
    unsigned kind = (unsigned)(cqe->user_data >> 56);
    int fd = (int)(uint32_t)cqe->user_data;
    s->futex_armed &= kind != K_FUTEX;
    s->read_armed &= kind != K_WAKE;
    *woken |= kind == K_FUTEX || kind == K_WAKE;
    struct reg *g = (kind == K_POLL || kind == K_UPDATE) && fd < s->cap ? &s->regs[fd] : NULL;
    if (!g || g->state != ARMED || g->seq != ((cqe->user_data >> 32) & 0xffffffu))
        return k; /* a wake-up, or stale (trap d) */
    if (kind == K_UPDATE) {
        /* Only failures come back: -EALREADY, the poll was busy: retry; -ENOENT, it has
         * ended, and its last CQE re-arms it. */
        if (cqe->res == -EALREADY)
            mark(s, fd, false);
        return k;
    }
    bool more = cqe->flags & IORING_CQE_F_MORE;
    if (!more)
        g->state = IDLE; /* trap c; not re-armed after an error but by a modify */
    if (!more && (cqe->res >= 0 || cqe->res == -ECANCELED))
        mark(s, fd, true);
    uint32_t ev = from_poll(cqe->res >= 0 ? (uint32_t)cqe->res : 0u);
    if (cqe->res < 0 && cqe->res != -ECANCELED)
        ev = EVLOOP_ERROR;
    if (!ev)
        return k;
    if (more)
        mark(s, fd, false); /* trap b */
    if (g->batch == s->batch && g->slot < k && out[g->slot].tag == g->tag) {
        out[g->slot].events |= ev; /* one report per fd per wait */
        return k;
    }
    g->batch = s->batch;
    g->slot = k;
    out[k] = (struct evloop__io_event){g->tag, ev, 0};
    return k + 1;
}

/* Loop thread: keeps the k reports in out[] that poll(2) finds true now (trap b), with the
 * events it finds; all of them if poll(2) fails. Returns how many are kept. */
static int validate(struct evloop__io_event *out, struct pollfd *pfd, int k)
{
    if (k == 0 || poll(pfd, (nfds_t)k, 0) < 0)
        return k;
    int kept = 0;
    for (int i = 0; i < k; i++) {
        uint32_t ev = from_poll((uint32_t)pfd[i].revents);
        if (ev)
            out[kept++] = (struct evloop__io_event){out[i].tag, ev, 0};
    }
    return kept;
}

/* Loop thread: drains the CQ in batches into at most max reports; the rest stays queued. */
static int dispatch(struct uring *s, struct evloop__io_event *out, int max, bool *woken)
{
    struct io_uring_cqe *cqes[CQE_BATCH];
    struct pollfd pfd[MAX_REPORTS];
    unsigned n;
    int k = 0;
    max = max < MAX_REPORTS ? max : MAX_REPORTS;
    pthread_mutex_lock(&s->lock);
    s->batch++;
    while (k < max && (n = io_uring_peek_batch_cqe(&s->ring, cqes, CQE_BATCH)) > 0) {
        unsigned i = 0;
        for (; i < n && k < max; i++) {
            int before = k;
            k = handle(s, cqes[i], out, k, woken);
            if (k > before) {
                int fd = (int)(uint32_t)cqes[i]->user_data;
                pfd[before] = (struct pollfd){fd, (short)to_poll(s->regs[fd].events), 0};
            }
        }
        io_uring_cq_advance(&s->ring, i);
    }
    pthread_mutex_unlock(&s->lock);
    return validate(out, pfd, k);
}

static int uring_wait(void *state, int64_t timeout_ns, struct evloop__io_event *out, int max)
{
    struct uring *s = state;
    uint64_t deadline = evloop__clock_ns() + (uint64_t)(timeout_ns > 0 ? timeout_ns : 0);
    for (;;) {
        /* seq_cst: pairs with the store in uring_wake(). */
        bool block = timeout_ns != 0 &&
                     !(atomic_load(&s->wake_pending) && atomic_exchange(&s->wake_pending, false));
        int r = apply(s, &block);
        if (r == 0)
            r = enter(s, block, timeout_ns);
        bool woken = !block;
        int n = r < 0 ? r : dispatch(s, out, max, &woken);
        if (n != 0 || woken)
            return n;
        /* Only stale or internal CQEs: wait again, for what is left of the timeout. */
        uint64_t now = evloop__clock_ns();
        if (timeout_ns > 0 && now >= deadline)
            return 0;
        timeout_ns = timeout_ns > 0 ? (int64_t)(deadline - now) : timeout_ns;
    }
}

static int uring_add(void *state, int fd, uint32_t events, uint64_t tag)
{
    struct uring *s = state;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))
        return -EPERM; /* as epoll: a file is always ready, polling it means nothing */
    pthread_mutex_lock(&s->lock);
    int cap = s->cap ? s->cap : 64, r = 0;
    while (cap <= fd)
        cap *= 2;
    struct reg *regs = cap > s->cap ? realloc(s->regs, (size_t)cap * sizeof(*regs)) : s->regs;
    if (!regs) {
        r = -ENOMEM;
    } else if (cap > s->cap) {
        memset(regs + s->cap, 0, (size_t)(cap - s->cap) * sizeof(*regs));
        s->regs = regs;
        s->cap = cap;
    }
    struct reg *g = r == 0 ? &s->regs[fd] : NULL;
    if (g && g->state != FREE)
        r = -EEXIST;
    if (r == 0) {
        *g = (struct reg){.tag = tag,
                          .events = events,
                          .seq = ++s->seq & 0xffffffu,
                          .state = IDLE,
                          .next_dirty = g->next_dirty,
                          .dirty = g->dirty};
        mark(s, fd, true);
        s->nactive++;
    }
    pthread_mutex_unlock(&s->lock);
    if (r == 0)
        kick(s);
    return r;
}

static int uring_modify(void *state, int fd, uint32_t events, uint64_t tag)
{
    struct uring *s = state;
    pthread_mutex_lock(&s->lock);
    struct reg *g = fd >= 0 && fd < s->cap ? &s->regs[fd] : NULL;
    int r = g && g->state != FREE ? 0 : -ENOENT;
    if (r == 0) {
        g->tag = tag;
        g->events = events;
        mark(s, fd, g->state == IDLE);
    }
    pthread_mutex_unlock(&s->lock);
    if (r == 0)
        kick(s);
    return r;
}

static int uring_remove(void *state, int fd)
{
    struct uring *s = state;
    pthread_mutex_lock(&s->lock);
    struct reg *g = fd >= 0 && fd < s->cap ? &s->regs[fd] : NULL;
    if (g && g->state != FREE) {
        if (g->state == ARMED)
            cancel(s, udata(K_POLL, g->seq, fd));
        g->state = FREE;
        if (--s->nactive == 0 && s->futex_armed)
            cancel(s, udata(K_FUTEX, 0, 0)); /* trap g */
    }
    pthread_mutex_unlock(&s->lock);
    return 0;
}

static int uring_wake(void *state)
{
    struct uring *s = state;
    if (s->efd >= 0)
        return write_eventfd(s);
    atomic_store(&s->wake_pending, true); /* seq_cst: pairs with the exchange in uring_wait() */
    kick(s);
    return 0;
}

static int uring_init(void **out, _Atomic uint32_t *word, unsigned *caps)
{
    struct uring *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    int r = evloop__uring_start(&s->ring);
    bool word_wait = r == 0 && evloop__uring_can_wait_on_word();
    /* Blocking: an io_uring read of a non-blocking eventfd fails with EAGAIN, never waits. */
    s->efd = r == 0 && !word_wait ? eventfd(0, EFD_CLOEXEC) : -1;
    if (r == 0 && !word_wait && s->efd < 0) {
        r = -errno;
        io_uring_queue_exit(&s->ring);
    }
    if (r < 0) {
        free(s);
        return r;
    }
    pthread_mutex_init(&s->lock, NULL);
    s->dirty = -1;
    s->word = word;
    *caps = word_wait ? EVLOOP__CAP_WORD_WAKE : 0;
    *out = s;
    return 0;
}

static void uring_destroy(void *state)
{
    struct uring *s = state;
    /* The ring is torn down asynchronously: cancel now what points into memory freed next. */
    if (s->futex_armed)
        cancel(s, udata(K_FUTEX, 0, 0)); /* trap g */
    if (s->read_armed)
        cancel(s, udata(K_WAKE, 0, 0));
    io_uring_queue_exit(&s->ring);
    if (s->efd >= 0)
        close(s->efd);
    pthread_mutex_destroy(&s->lock);
    free(s->regs);
    free(s);
}

const struct evloop__backend evloop__uring_mpoll = {
    .name = "io_uring",
    .init = uring_init,
    .destroy = uring_destroy,
    .add = uring_add,
    .modify = uring_modify,
    .remove = uring_remove,
    .wait = uring_wait,
    .wake = uring_wake,
};
