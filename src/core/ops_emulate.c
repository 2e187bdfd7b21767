/* The readiness emulation of completion operations, for backends without native ops
 * (epoll, kqueue, and io_uring until it has them): the provider seam of ops_emulate.h. A start
 * tries the non-blocking syscall first; on EAGAIN the op waits, and its fd is registered
 * with the backend (add/modify/remove, the same calls io.c makes, under the same io_lock)
 * with a tag of its own, so io.c hands its readiness here, and evloop_io_* never sees it.
 *
 * Registration is lazy, to cost no syscall per op in the request/response pattern:
 *  a. An fd stays registered while anything of it is pending (callbacks included): the
 *     recv posted from the callback of the previous send finds READABLE still registered.
 *  b. A direction is dropped only when readiness comes for it and no op waits (level-
 *     triggered pollers would report it again and again), and the whole registration when
 *     nothing of the fd is pending (ops.c settles it right after the last callback).
 *  c. A recv (or accept) whose last attempt found the socket empty, with READABLE still
 *     registered, waits without trying: a level-triggered poller reports data that arrived
 *     since, so the try would only be an EAGAIN more. The first op on an fd always tries.
 *  d. A recv, or an accept whose last try failed, started by a callback of a delivery past
 *     its budget waits without trying (state_ops.h, EVLOOP__OPS_DELIVERY_BUDGET), so that ops
 *     completed at once cannot chain on without end. */
#include <fcntl.h>
#include <limits.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ops_emulate.h"

#ifdef MSG_NOSIGNAL
#define SEND_FLAGS (MSG_DONTWAIT | MSG_NOSIGNAL)
#else
#define SEND_FLAGS MSG_DONTWAIT /* macOS: no MSG_NOSIGNAL; a reset peer may raise SIGPIPE */
#endif
#define GEN_MASK 0x7fffffffu
#define READ_SIDE (EVLOOP_READABLE | EVLOOP_HANGUP | EVLOOP_ERROR)
#define WRITE_SIDE (EVLOOP_WRITABLE | EVLOOP_HANGUP | EVLOOP_ERROR)

static uint64_t tag_of(int fd, uint32_t gen)
{
    return EVLOOP__OPS_TAG | (uint64_t)(gen & GEN_MASK) << 32 | (uint32_t)fd;
}

static bool would_block(int err)
{
    return err == EAGAIN || err == EWOULDBLOCK;
}

/* ---- the syscalls: 1 = done (*res), 0 = would block ------------------------------------ */

static int accept_nb(int fd)
{
#if defined(__linux__) || defined(__FreeBSD__) || defined(__NetBSD__) || defined(__OpenBSD__)
    return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
#else
    int c = accept(fd, NULL, NULL);
    if (c >= 0 && (fcntl(c, F_SETFD, FD_CLOEXEC) < 0 ||
                   fcntl(c, F_SETFL, fcntl(c, F_GETFL) | O_NONBLOCK) < 0)) {
        int err = errno;
        close(c);
        errno = err;
        return -1;
    }
    return c;
#endif
}

int evloop__emu_try_accept(int fd, int64_t *res)
{
    for (;;) {
        int c = accept_nb(fd);
        if (c >= 0) {
            *res = c;
            return 1;
        }
        /* ECONNABORTED: a connection reset while queued; the next one may be fine. */
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if (would_block(errno))
            return 0;
        *res = -errno;
        return 1;
    }
}

static int try_recv(struct evloop__op *op, int64_t *res)
{
    size_t len = op->len > SSIZE_MAX ? SSIZE_MAX : op->len;
    for (;;) {
        ssize_t n = recv(op->fd, op->buf, len, MSG_DONTWAIT);
        if (n >= 0) {
            *res = n;
            return 1;
        }
        if (errno == EINTR)
            continue;
        if (would_block(errno))
            return 0;
        *res = -errno;
        return 1;
    }
}

/* Writes what is left of the current start (buf + done, from emu_off on) until it is all
 * written or the socket is full. *res: the bytes written by this start, or an error. */
static int try_send(struct evloop__op *op, size_t cap, int64_t *res)
{
    const char *base = op->buf + op->done;
    size_t want = op->len - op->done;
    if (cap && want > cap)
        want = cap;
    while (op->emu_off < want) {
        size_t chunk = want - op->emu_off > SSIZE_MAX ? SSIZE_MAX : want - op->emu_off;
        ssize_t n = send(op->fd, base + op->emu_off, chunk, SEND_FLAGS);
        if (n > 0) {
            op->emu_off += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && would_block(errno)) {
            return 0;
        } else {
            *res = n < 0 ? -errno : -EIO;
            return 1;
        }
    }
    *res = (int64_t)op->emu_off;
    return 1;
}

/* ---- registration ---------------------------------------------------------------------- */

/* Makes sure want is registered (adding to what is). Returns 0 or the backend's -errno. */
static int arm(evloop *loop, struct evloop__ofd *f, int fd, uint32_t want)
{
    if ((f->armed & want) == want)
        return 0;
    uint32_t events = f->armed | want;
    const struct evloop__backend *b = loop->backend;
    int r = f->armed ? b->modify(loop->backend_state, fd, events, tag_of(fd, f->gen))
                     : b->add(loop->backend_state, fd, events, tag_of(fd, f->gen));
    if (r == -ENOENT && f->armed) /* the file was closed and its number reused: trap b */
        r = b->add(loop->backend_state, fd, events, tag_of(fd, f->gen));
    if (r == 0)
        f->armed = events;
    return r;
}

static void disarm_all(evloop *loop, struct evloop__ofd *f, int fd)
{
    loop->backend->remove(loop->backend_state, fd);
    f->armed = 0;
    f->gen++; /* reports already collected for the old registration are dropped */
    f->drained = false;
}

/* Keeps only the directions in keep registered. */
static void narrow(evloop *loop, struct evloop__ofd *f, int fd, uint32_t keep)
{
    if (keep == f->armed)
        return;
    if (keep == 0) {
        disarm_all(loop, f, fd);
    } else if (loop->backend->modify(loop->backend_state, fd, keep, tag_of(fd, f->gen)) == 0) {
        f->armed = keep;
    }
}

static uint32_t waited_for(const struct evloop__ofd *f)
{
    return (f->w_accept || f->w_recv ? EVLOOP_READABLE : 0u) | (f->w_send ? EVLOOP_WRITABLE : 0u);
}

/* ---- the provider ---------------------------------------------------------------------- */

/* op waits for readiness in *slot: registers its direction. */
static int wait_in(evloop *loop, struct evloop__ofd *f, struct evloop__op *op,
                   struct evloop__op **slot, uint32_t dir)
{
    int r = arm(loop, f, op->fd, dir);
    if (r == 0)
        *slot = op;
    return r;
}

int evloop__emu_start(evloop *loop, struct evloop__ofd *f, struct evloop__op *op, int64_t *res)
{
    bool skip = f->drained && (f->armed & EVLOOP_READABLE); /* c */
    int r;
    switch (op->kind) {
    case EVLOOP__OP_ACCEPT:
        r = skip || (f->accept_failed && evloop__ops_over_budget(&loop->ops))
                ? 0
                : evloop__emu_try_accept(op->fd, res);
        f->drained = r == 0;
        f->accept_failed = r == 1 && *res < 0;
        return r ? r : wait_in(loop, f, op, &f->w_accept, EVLOOP_READABLE);
    case EVLOOP__OP_RECV:
        r = skip || evloop__ops_over_budget(&loop->ops) ? 0 : try_recv(op, res);
        f->drained = r == 0 || (*res >= 0 && (size_t)*res < op->len);
        return r ? r : wait_in(loop, f, op, &f->w_recv, EVLOOP_READABLE);
    default:
        op->emu_off = 0;
        r = try_send(op, loop->ops.send_cap, res);
        return r ? r : wait_in(loop, f, op, &f->w_send, EVLOOP_WRITABLE);
    }
}

int evloop__emu_cancel(evloop *loop, struct evloop__ofd *f, struct evloop__op *op)
{
    (void)loop;
    if (f->w_accept == op)
        f->w_accept = NULL;
    if (f->w_recv == op)
        f->w_recv = NULL;
    if (f->w_send == op)
        f->w_send = NULL;
    return 1; /* the registration narrows lazily (b) */
}

/* Tries the op waiting in *slot; when it is done, hands its result to ops.c (which may
 * start the next op of the fd, so the slot is re-read by the caller). */
static void retry(evloop *loop, struct evloop__ofd *f, struct evloop__op **slot,
                  evloop__emu_result_fn result)
{
    struct evloop__op *op = *slot;
    int64_t res = 0;
    int done = op->kind == EVLOOP__OP_ACCEPT ? evloop__emu_try_accept(op->fd, &res)
               : op->kind == EVLOOP__OP_RECV ? try_recv(op, &res)
                                             : try_send(op, loop->ops.send_cap, &res);
    if (op->kind != EVLOOP__OP_SEND)
        f->drained = !done || (res >= 0 && op->kind == EVLOOP__OP_RECV && (size_t)res < op->len);
    if (op->kind == EVLOOP__OP_ACCEPT)
        f->accept_failed = done && res < 0;
    if (!done)
        return;
    *slot = NULL;
    result(loop, op, res);
}

void evloop__emu_ready(evloop *loop, uint64_t tag, uint32_t events, evloop__emu_result_fn result)
{
    int fd = (int)(uint32_t)tag;
    struct evloop__ofd *f = fd < loop->ops.cap ? &loop->ops.fds[fd] : NULL;
    if (!f || !f->armed || (uint32_t)(tag >> 32 & GEN_MASK) != (f->gen & GEN_MASK))
        return; /* stale: the registration was dropped (and maybe made again) since */
    uint32_t before = waited_for(f);
    if ((events & READ_SIDE) && f->w_accept)
        retry(loop, f, &f->w_accept, result);
    if ((events & READ_SIDE) && f->w_recv)
        retry(loop, f, &f->w_recv, result);
    if ((events & WRITE_SIDE) && f->w_send)
        retry(loop, f, &f->w_send, result);
    /* b: readiness nobody waited for is dropped from the registration. */
    uint32_t unwanted = events & (EVLOOP_READABLE | EVLOOP_WRITABLE) & ~before;
    if (before == 0)
        narrow(loop, f, fd, waited_for(f)); /* hang-up or error alone included */
    else if (unwanted)
        narrow(loop, f, fd, (f->armed & ~unwanted) | waited_for(f));
}

bool evloop__emu_settle(evloop *loop, struct evloop__ofd *f, int fd)
{
    f->w_accept = f->w_recv = f->w_send = NULL;
    if (!f->armed) {
        f->drained = false;
        return false;
    }
    disarm_all(loop, f, fd);
    return true;
}
