/* Completion operations: evloop_accept, evloop_recv, evloop_send, evloop_op_cancel, their
 * per-fd state, cancel and stop. An op is started by a provider: the backend's native
 * op_start (backend.h) or the readiness emulation (ops_emulate.c), decided per loop.
 * Ordering, cancel, stop, forwarding from other threads and the callbacks live here, so
 * they behave the same on every backend. Contract and locking: ops.h. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "callback.h"
#include "io.h"
#include "ops.h"
#include "ops_emulate.h"
#include "ops_sim.h"

#define OP_CACHE_MAX 256           /* completed ops the loop thread keeps for reuse */
#define REAP_WAIT_NS 100000000     /* stop: one wait for native results, 100 ms */
#define REAP_GIVE_UP_NS 10000000000 /* stop: native results missing this long: abandoned */

struct cancel_req {
    evloop *loop;
    int fd;
};

/* ---- small helpers ------------------------------------------------------------------- */

static struct evloop__op *op_new(evloop *loop, bool local)
{
    struct evloop__ops *o = &loop->ops;
    if (local && o->cache) {
        struct evloop__op *op = o->cache;
        o->cache = op->next;
        o->ncache--;
        return op;
    }
    return malloc(sizeof(struct evloop__op));
}

/* Loop thread. */
static void op_free(evloop *loop, struct evloop__op *op)
{
    struct evloop__ops *o = &loop->ops;
    if (o->ncache >= OP_CACHE_MAX) {
        free(op);
        return;
    }
    op->next = o->cache;
    o->cache = op;
    o->ncache++;
}

static bool stopping(evloop *loop)
{
    return atomic_load_explicit(&loop->stopping, memory_order_relaxed);
}

/* Under io_lock: native ops when the backend has them, unless $EVLOOP_OPS says "emulate"
 * (to compare both on one backend) or "native-sim" (tests). Decided once per loop, at its
 * first op. */
static void decide_mode(evloop *loop)
{
    struct evloop__ops *o = &loop->ops;
    if (o->mode != EVLOOP__OPS_UNDECIDED)
        return;
    const char *env = getenv("EVLOOP_OPS");
    bool has = loop->backend->op_start && loop->backend->op_cancel;
    if (env && strcmp(env, "native-sim") == 0) {
        o->mode = EVLOOP__OPS_NATIVE_SIM;
        o->send_cap = EVLOOP__SIM_SEND_MAX;
    } else {
        o->mode = has && !(env && strcmp(env, "emulate") == 0) ? EVLOOP__OPS_NATIVE
                                                                : EVLOOP__OPS_EMULATED;
    }
}

/* The emulation runs below (registrations to settle): every mode but a real native one. */
static bool emulated_below(const struct evloop__ops *o)
{
    return o->mode != EVLOOP__OPS_NATIVE;
}

/* Under io_lock: makes room for fd in the table. */
static int reserve(struct evloop__ops *o, int fd)
{
    if (fd < o->cap)
        return 0;
    int cap = o->cap ? o->cap : 64;
    while (cap <= fd)
        cap *= 2;
    struct evloop__ofd *fds = realloc(o->fds, (size_t)cap * sizeof(*fds));
    if (!fds)
        return -ENOMEM;
    memset(fds + o->cap, 0, (size_t)(cap - o->cap) * sizeof(*fds));
    o->fds = fds;
    o->cap = cap;
    return 0;
}

static struct evloop__ofd *ofd_of(evloop *loop, int fd)
{
    return fd >= 0 && fd < loop->ops.cap ? &loop->ops.fds[fd] : NULL;
}

static bool has_linked(const struct evloop__ofd *f)
{
    return f && (f->accept || f->recv || f->send_head);
}

/* Under io_lock: an fd counts in the loop's nfds while something of it is pending or it is
 * registered, so the loop sleeps in the poller (where its results come from) meanwhile.
 * Returns whether that switched the loop between futex and poller sleep. */
static bool recount(evloop *loop, struct evloop__ofd *f)
{
    bool want = f->pending > 0 || f->armed != 0;
    if (want == f->counted)
        return false;
    f->counted = want;
    /* seq_cst: pairs with the re-read of nfds in prepare_sleep() (tick.c), as io.c's. */
    uint32_t before = want ? atomic_fetch_add(&loop->nfds, 1) : atomic_fetch_sub(&loop->nfds, 1);
    return want ? before == 0 : before == 1;
}

static void announce_switch(evloop *loop, bool switched)
{
    if (switched && !evloop__on_loop_thread(loop))
        evloop__sleep_kick(&loop->sleep);
}

/* ---- completion: the done list --------------------------------------------------------- */

/* Under io_lock, loop thread: op has its final result and has left its fd's slot or FIFO;
 * its callback runs from the done list, in completion order. */
static void finish(evloop *loop, struct evloop__op *op, int64_t res)
{
    struct evloop__ops *o = &loop->ops;
    op->res = res;
    op->flags = (uint8_t)((op->flags & ~EVLOOP__OPF_STARTED) | EVLOOP__OPF_DONE);
    op->next = NULL;
    if (o->done_tail)
        o->done_tail->next = op;
    else
        o->done = op;
    o->done_tail = op;
}

/* After op's callback: its fd has one op less pending; an fd left with none is settled
 * (its registration dropped) now, before anything else runs, so that a close made in the
 * callback is seen by the backend at once. */
static void after_callback(evloop *loop, struct evloop__op *op)
{
    struct evloop__ops *o = &loop->ops;
    pthread_mutex_lock(&loop->io_lock);
    struct evloop__ofd *f = &o->fds[op->fd];
    f->pending--;
    o->live--;
    bool switched = false;
    if (f->pending == 0) {
        if (emulated_below(o))
            evloop__emu_settle(loop, f, op->fd);
        switched = recount(loop, f);
    }
    op->flags |= EVLOOP__OPF_DELIVERED;
    bool keep = op->flags & EVLOOP__OPF_TASK; /* its start task frees it */
    pthread_mutex_unlock(&loop->io_lock);
    (void)switched; /* on the loop thread: the loop re-reads nfds before it sleeps */
    if (!keep)
        op_free(loop, op);
}

/* Loop thread, without the lock: the callback of a send that failed is about to start; if it
 * is the one that made its fd refuse sends, sends started from now on go out again. */
static void send_failure_heard(evloop *loop, struct evloop__op *op)
{
    pthread_mutex_lock(&loop->io_lock);
    struct evloop__ofd *f = &loop->ops.fds[op->fd];
    if (f->send_failed == op)
        f->send_failed = NULL;
    pthread_mutex_unlock(&loop->io_lock);
}

/* Loop thread, without the lock: runs the callbacks of the done list, each followed by
 * its microtasks, until the list is empty (callbacks may complete more ops). It counts
 * them, so that recvs started past a budget wait for readiness (state_ops.h). */
static void run_done(evloop *loop)
{
    struct evloop__ops *o = &loop->ops;
    bool outer = o->delivering;
    o->delivering = true;
    if (!outer)
        o->delivered = 0;
    struct evloop__op *op;
    while ((op = o->done) != NULL) {
        o->done = op->next;
        if (!o->done)
            o->done_tail = NULL;
        if (op->kind == EVLOOP__OP_SEND && op->res < 0)
            send_failure_heard(loop, op);
        op->cb(op->arg, op->fd, op->res);
        o->delivered++;
        evloop__count(&loop->stats.io_callbacks, 1);
        evloop__drain_microtasks(loop);
        after_callback(loop, op);
    }
    o->delivering = outer;
}

static void done_task(void *arg)
{
    evloop *loop = arg;
    loop->ops.done_task = false;
    run_done(loop);
}

/* Loop thread, after a call that may have completed ops (a result found at once, a
 * cancel): their callbacks run from a loop-thread internal task, never inside the call. A
 * caller up the stack that runs the done list anyway (dispatch) needs no task. */
static void schedule_done(evloop *loop)
{
    struct evloop__ops *o = &loop->ops;
    if (!o->done || o->delivering || o->done_task)
        return;
    /* On failure (no memory to grow the queue) the next dispatch, call or stop delivers. */
    if (evloop__taskq_push(&loop->local_internal, done_task, loop) == 0)
        o->done_task = true;
}

/* The emulation's way back for a result (ops_emulate.h). */
static void emu_result(evloop *loop, struct evloop__op *op, int64_t res)
{
    if (loop->ops.mode == EVLOOP__OPS_NATIVE_SIM)
        evloop__sim_queue(loop, op, res);
    else
        evloop__ops_result(loop, op, res);
}

/* ---- starting ops --------------------------------------------------------------------- */

/* Starts op with its provider. 1: it ended at once (*res); 0: its result comes later;
 * < 0: it could not start.
 * An accept in a native mode first takes a connection already queued, as the emulation
 * does, and goes to the provider only when none is. A native result comes back
 * behind the completions of every busy connection, and the next accept starts only then:
 * a loaded server took in one connection per lap of io_uring's completion queue, and a
 * burst of connections waited seconds. Taken at once, the callback runs from the done list
 * right away, so a server that accepts again from it drains the backlog in one go, as a
 * readiness server does. The cost: one accept4 more (EAGAIN) each time the backlog is empty.
 * A blocking listener (f->nonblock false) is left to the provider: accept4 would block; so
 * is an accept past the delivery budget whose last try failed (state_ops.h). */
static int provider_start(evloop *loop, struct evloop__ofd *f, struct evloop__op *op,
                          int64_t *res)
{
    struct evloop__ops *o = &loop->ops;
    int r;
    if (o->mode != EVLOOP__OPS_EMULATED && op->kind == EVLOOP__OP_ACCEPT && f->nonblock &&
        !(f->accept_failed && evloop__ops_over_budget(o))) {
        r = evloop__emu_try_accept(op->fd, res);
        f->accept_failed = r == 1 && *res < 0;
        if (r == 1)
            return 1;
    }
    if (o->mode == EVLOOP__OPS_NATIVE) {
        size_t off = op->kind == EVLOOP__OP_SEND ? op->done : 0;
        struct evloop__op_desc d = {op->kind, op->fd, op->buf ? op->buf + off : NULL,
                                    op->len - off};
        r = loop->backend->op_start(loop->backend_state, op, &d);
    } else if (o->mode == EVLOOP__OPS_NATIVE_SIM) {
        r = evloop__sim_start(loop, f, op);
    } else {
        r = evloop__emu_start(loop, f, op, res);
    }
    if (r == 0)
        op->flags |= EVLOOP__OPF_STARTED;
    if (r == 0 && o->mode != EVLOOP__OPS_EMULATED)
        o->inflight++;
    return r;
}

/* Asks the provider to end a started op. 1: it ended now; 0: its result comes later. */
static int provider_cancel(evloop *loop, struct evloop__ofd *f, struct evloop__op *op)
{
    struct evloop__ops *o = &loop->ops;
    if (op->flags & EVLOOP__OPF_CANCELLED)
        return 0;
    if (o->mode == EVLOOP__OPS_EMULATED)
        return evloop__emu_cancel(loop, f, op);
    op->flags |= EVLOOP__OPF_CANCELLED;
    if (o->mode == EVLOOP__OPS_NATIVE) {
        loop->backend->op_cancel(loop->backend_state, op); /* the result comes anyway */
    } else {
        evloop__sim_cancel(loop, f, op);
    }
    return 0;
}

/* Under io_lock, loop thread: starts the op in an accept or recv slot, or finishes it when
 * it is cancelled, the loop stops, or the provider answers at once. */
static void start_slot(evloop *loop, struct evloop__ofd *f, struct evloop__op **slot)
{
    struct evloop__op *op = *slot;
    int64_t res = -ECANCELED;
    int r = 1;
    if (!stopping(loop) && !(op->flags & EVLOOP__OPF_CANCEL))
        r = provider_start(loop, f, op, &res);
    if (r == 0)
        return;
    *slot = NULL;
    finish(loop, op, r < 0 ? r : res);
}

static void pop_send(struct evloop__ofd *f)
{
    f->send_head = f->send_head->next;
    if (!f->send_head)
        f->send_tail = NULL;
}

/* Under io_lock, loop thread: send op ends with res, which failed (neither its length nor a
 * cancel). The first such send of f makes f refuse sends until its callback starts. */
static void note_send_failed(struct evloop__ofd *f, struct evloop__op *op, int64_t res)
{
    if (res < 0 && res != -ECANCELED && !f->send_failed)
        f->send_failed = op;
}

/* Under io_lock, loop thread: starts the oldest send unless it is started already; sends
 * that end at once are finished and the next one starts, so they complete in order. After a
 * send failed, until its callback starts, the sends behind it end with its error, none of
 * their bytes written: the peer never gets a later send's bytes after a hole (the failed
 * one may have written part of itself), and the caller hears of the failure first. */
static void advance_sends(evloop *loop, struct evloop__ofd *f)
{
    struct evloop__op *op;
    while ((op = f->send_head) != NULL && !(op->flags & EVLOOP__OPF_STARTED)) {
        int64_t res = f->send_failed ? f->send_failed->res : -ECANCELED;
        int r = 1;
        if (!f->send_failed && !stopping(loop) && !(op->flags & EVLOOP__OPF_CANCEL))
            r = provider_start(loop, f, op, &res);
        if (r == 0)
            return;
        if (r == 1 && res > 0) {
            op->done += (size_t)res;
            if (op->done < op->len)
                continue; /* a short write: the rest is a new start */
            res = (int64_t)op->len;
        } else if (r == 1 && res == 0) {
            res = -EIO; /* a send that wrote nothing: never reported by the providers */
        }
        if (r < 0)
            res = r;
        pop_send(f);
        finish(loop, op, res);
        note_send_failed(f, op, res);
    }
}

/* Under io_lock, loop thread: starts every linked op of f that is not started yet. */
static void advance(evloop *loop, struct evloop__ofd *f)
{
    if (f->accept && !(f->accept->flags & EVLOOP__OPF_STARTED))
        start_slot(loop, f, &f->accept);
    if (f->recv && !(f->recv->flags & EVLOOP__OPF_STARTED))
        start_slot(loop, f, &f->recv);
    advance_sends(loop, f);
}

void evloop__ops_result(evloop *loop, struct evloop__op *op, int64_t res)
{
    struct evloop__ofd *f = &loop->ops.fds[op->fd];
    op->flags &= (uint8_t)~EVLOOP__OPF_STARTED;
    if (op->flags & EVLOOP__OPF_CANCEL) {
        if (op->kind == EVLOOP__OP_ACCEPT && res >= 0)
            close((int)res); /* accepted after the cancel: nobody will get it */
        res = -ECANCELED;
    }
    if (op->kind != EVLOOP__OP_SEND) {
        struct evloop__op **slot = op->kind == EVLOOP__OP_ACCEPT ? &f->accept : &f->recv;
        if (*slot == op)
            *slot = NULL; /* a cancelled native op has left it already */
        finish(loop, op, res);
        return;
    }
    if (res > 0) {
        op->done += (size_t)res;
        if (op->done < op->len) {
            advance_sends(loop, f); /* the rest of it, still first in the FIFO */
            return;
        }
        res = (int64_t)op->len;
    } else if (res == 0) {
        res = -EIO;
    }
    pop_send(f);
    finish(loop, op, res);
    note_send_failed(f, op, res);
    advance_sends(loop, f);
}

/* ---- linking a new op ------------------------------------------------------------------ */

/* Under io_lock: the checks of a first op on an fd (nothing pending on it): a socket, and
 * for accept one that listens. One syscall per fd that becomes busy, not per op. */
static int check_socket(int fd, int kind)
{
    int v = 0;
    socklen_t len = sizeof(v);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len) < 0)
        return -errno;
#ifdef SO_ACCEPTCONN
    len = sizeof(v);
    if (kind == EVLOOP__OP_ACCEPT &&
        (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) < 0 || v == 0))
        return -EINVAL;
#else
    (void)kind;
#endif
    return 0;
}

/* Whether fd is O_NONBLOCK: an accept tried at once on a blocking listener would block the
 * loop when no connection is queued. Asked with the checks of a first op. */
static bool is_nonblocking(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl >= 0 && (fl & O_NONBLOCK);
}

/* Under io_lock: puts op into its fd's slot or FIFO, or says why not. */
static int link_op(evloop *loop, struct evloop__op *op, struct evloop__ofd **out)
{
    struct evloop__ops *o = &loop->ops;
    if (stopping(loop))
        return -ESHUTDOWN;
    if (evloop__io_has_fd(loop, op->fd))
        return -EBUSY;
    struct evloop__ofd *f = ofd_of(loop, op->fd);
    if (f && ((op->kind == EVLOOP__OP_ACCEPT && f->accept) ||
              (op->kind == EVLOOP__OP_RECV && f->recv)))
        return -EBUSY;
    /* From another thread, an fd whose ops have all completed (callbacks may still be
     * due) may already be a new file under the same number: checked as a first op, and its
     * emulated registration, which may belong to the closed file, is dropped. */
    bool first = !f || f->pending == 0;
    bool unsure = !first && !has_linked(f) && !evloop__on_loop_thread(loop);
    int r = 0;
    /* Checked before the table grows, so a wild fd number allocates nothing. */
    if ((first || unsure) && (r = check_socket(op->fd, op->kind)) < 0)
        return r;
    if ((r = reserve(o, op->fd)) < 0)
        return r;
    f = &o->fds[op->fd];
    if ((first || unsure) && op->kind == EVLOOP__OP_ACCEPT) {
        f->nonblock = is_nonblocking(op->fd);
        f->accept_failed = false;
    }
    if (unsure && emulated_below(o))
        evloop__emu_settle(loop, f, op->fd);
    decide_mode(loop);
    if (op->kind == EVLOOP__OP_ACCEPT) {
        f->accept = op;
    } else if (op->kind == EVLOOP__OP_RECV) {
        f->recv = op;
    } else {
        op->next = NULL;
        if (f->send_tail)
            f->send_tail->next = op;
        else
            f->send_head = op;
        f->send_tail = op;
    }
    f->pending++;
    o->live++;
    *out = f;
    return 0;
}

/* Under io_lock: takes back an op linked a moment ago that will not run (not started). */
static void unlink_op(evloop *loop, struct evloop__ofd *f, struct evloop__op *op)
{
    if (op->kind == EVLOOP__OP_ACCEPT) {
        f->accept = NULL;
    } else if (op->kind == EVLOOP__OP_RECV) {
        f->recv = NULL;
    } else {
        struct evloop__op **p = &f->send_head, *prev = NULL;
        while (*p != op) {
            prev = *p;
            p = &(*p)->next;
        }
        *p = op->next;
        if (f->send_tail == op)
            f->send_tail = prev;
    }
    f->pending--;
    loop->ops.live--;
}

/* Loop thread: the task a call from another thread queued for its op. It starts what of
 * the op's fd is not started yet; an op that ended meanwhile (cancelled, stopped) and whose
 * callback has run is freed here, since after_callback left it to this task. */
static void start_task(void *arg)
{
    struct evloop__op *op = arg;
    evloop *loop = op->loop;
    pthread_mutex_lock(&loop->io_lock);
    op->flags &= (uint8_t)~EVLOOP__OPF_TASK;
    bool delivered = op->flags & EVLOOP__OPF_DELIVERED;
    if (!(op->flags & EVLOOP__OPF_DONE))
        advance(loop, &loop->ops.fds[op->fd]);
    pthread_mutex_unlock(&loop->io_lock);
    if (delivered)
        op_free(loop, op);
    run_done(loop);
}

static int submit_op(evloop *loop, struct evloop__op *op)
{
    bool local = evloop__on_loop_thread(loop);
    struct evloop__ofd *f = NULL;
    pthread_mutex_lock(&loop->io_lock);
    int r = link_op(loop, op, &f);
    if (r == 0 && local) {
        advance(loop, f);
    } else if (r == 0) {
        /* Queued under the lock: a refusal (the loop stopped) is undone before the stop's
         * cancel, which takes the lock, can see the op. */
        op->flags |= EVLOOP__OPF_TASK;
        r = evloop_submit_internal(loop, start_task, op);
        if (r < 0)
            unlink_op(loop, f, op);
    }
    bool switched = r == 0 && recount(loop, f);
    pthread_mutex_unlock(&loop->io_lock);
    if (local) {
        if (r < 0)
            op_free(loop, op);
        schedule_done(loop);
    } else {
        if (r < 0)
            free(op);
        announce_switch(loop, switched);
    }
    return r;
}

static int new_op(evloop *loop, int kind, int fd, void *buf, size_t len, evloop_op_cb cb,
                  void *arg)
{
    if (!loop || !cb)
        return -EINVAL;
    if (fd < 0)
        return -EBADF;
    if (kind != EVLOOP__OP_ACCEPT && (len == 0 || !buf))
        return -EINVAL;
    struct evloop__op *op = op_new(loop, evloop__on_loop_thread(loop));
    if (!op)
        return -ENOMEM;
    *op = (struct evloop__op){.loop = loop, .cb = cb, .arg = arg, .buf = buf, .len = len,
                              .fd = fd, .kind = (uint8_t)kind};
    return submit_op(loop, op);
}

EVLOOP_API int evloop_accept(evloop *loop, int fd, evloop_op_cb cb, void *arg)
{
    return new_op(loop, EVLOOP__OP_ACCEPT, fd, NULL, 0, cb, arg);
}

EVLOOP_API int evloop_recv(evloop *loop, int fd, void *buf, size_t len, evloop_op_cb cb, void *arg)
{
    return new_op(loop, EVLOOP__OP_RECV, fd, buf, len, cb, arg);
}

EVLOOP_API int evloop_send(evloop *loop, int fd, const void *buf, size_t len, evloop_op_cb cb,
                           void *arg)
{
    /* The buffer is only read; it is kept as char * because recv shares the field. */
    return new_op(loop, EVLOOP__OP_SEND, fd, (void *)(uintptr_t)buf, len, cb, arg);
}

/* ---- cancel ------------------------------------------------------------------------------ */

/* Under io_lock, loop thread: cancels the ops of f that carry the cancel mark (all of them,
 * marked first, for a cancel made on the loop thread). Ops the provider ends at once finish
 * now; a native one finishes when its result comes back, and the sends behind it wait for
 * it, so sends finish in order. A cancelled native accept or recv leaves its slot at once. */
static void cancel_marked(evloop *loop, struct evloop__ofd *f)
{
    struct evloop__op **slots[2] = {&f->accept, &f->recv};
    for (int i = 0; i < 2; i++) {
        struct evloop__op *op = *slots[i];
        if (!op || !(op->flags & EVLOOP__OPF_CANCEL))
            continue;
        if (!(op->flags & EVLOOP__OPF_STARTED) || provider_cancel(loop, f, op) == 1) {
            *slots[i] = NULL;
            finish(loop, op, -ECANCELED);
        } else {
            *slots[i] = NULL; /* its result comes back later, as -ECANCELED */
        }
    }
    struct evloop__op *head = f->send_head;
    if (head && (head->flags & EVLOOP__OPF_CANCEL) && (head->flags & EVLOOP__OPF_STARTED) &&
        provider_cancel(loop, f, head) == 1) {
        pop_send(f);
        finish(loop, head, -ECANCELED);
    }
    advance_sends(loop, f); /* finishes the marked ones behind it that have not started */
}

static void mark_all(struct evloop__ofd *f)
{
    if (f->accept)
        f->accept->flags |= EVLOOP__OPF_CANCEL;
    if (f->recv)
        f->recv->flags |= EVLOOP__OPF_CANCEL;
    for (struct evloop__op *op = f->send_head; op; op = op->next)
        op->flags |= EVLOOP__OPF_CANCEL;
}

static void cancel_task(void *arg)
{
    struct cancel_req *req = arg;
    evloop *loop = req->loop;
    pthread_mutex_lock(&loop->io_lock);
    struct evloop__ofd *f = ofd_of(loop, req->fd);
    if (f)
        cancel_marked(loop, f);
    pthread_mutex_unlock(&loop->io_lock);
    free(req);
    run_done(loop);
}

EVLOOP_API int evloop_op_cancel(evloop *loop, int fd)
{
    if (!loop)
        return -EINVAL;
    if (fd < 0)
        return -EBADF;
    bool local = evloop__on_loop_thread(loop);
    struct cancel_req *req = local ? NULL : malloc(sizeof(*req));
    if (!local && !req)
        return -ENOMEM;
    int r = 0;
    pthread_mutex_lock(&loop->io_lock);
    struct evloop__ofd *f = ofd_of(loop, fd);
    if (!has_linked(f)) {
        r = -ENOENT;
    } else if (local) {
        mark_all(f);
        cancel_marked(loop, f);
    } else {
        /* The marks go on only once the task is queued, so a failed call changes nothing;
         * a loop that stopped meanwhile cancels everything itself. */
        *req = (struct cancel_req){loop, fd};
        r = evloop_submit_internal(loop, cancel_task, req);
        if (r == 0 || r == -ESHUTDOWN)
            mark_all(f);
        if (r == -ESHUTDOWN)
            r = 0;
        else if (r == 0)
            req = NULL;
    }
    pthread_mutex_unlock(&loop->io_lock);
    free(req);
    if (local)
        schedule_done(loop);
    return r;
}

/* ---- readiness dispatch (tick_poll.c), the fd claim (io.c), stop --------------------------- */

void evloop__ops_dispatch(evloop *loop, const struct evloop__io_event *ev)
{
    pthread_mutex_lock(&loop->io_lock);
    if (ev->events & EVLOOP__EV_OP) {
        loop->ops.inflight--;
        evloop__ops_result(loop, (struct evloop__op *)(uintptr_t)ev->tag, ev->res);
    } else {
        evloop__emu_ready(loop, ev->tag, ev->events, emu_result);
    }
    pthread_mutex_unlock(&loop->io_lock);
    run_done(loop);
}

int evloop__ops_claim_fd(evloop *loop, int fd)
{
    struct evloop__ofd *f = ofd_of(loop, fd);
    if (!f)
        return 0;
    /* Ops that have completed do not hold the fd, even if their callbacks are still due:
     * the number may already name a new file (closed in such a callback, reopened). */
    if (has_linked(f))
        return -EBUSY;
    if (emulated_below(&loop->ops))
        evloop__emu_settle(loop, f, fd);
    /* No kick for a switch to 0 here: evloop_io_add counts fd in again under the same lock. */
    recount(loop, f);
    return 0;
}

/* Stop: waits for the results of native ops still in the backend (their buffers are in
 * use until then), dispatching those and dropping readiness (the loop is stopping). A
 * backend that fails or stays silent for REAP_GIVE_UP_NS leaves its ops abandoned: their
 * memory is not freed, their callbacks never run, and later stop checks no longer wait. */
static void reap_native(evloop *loop)
{
    struct evloop__io_event ev[EVLOOP__IO_EVENTS_MAX];
    uint64_t last = evloop__clock_ns();
    while (loop->ops.inflight > 0) {
        /* wait() of the backend, and native-sim's held-back reports (ops_sim.h). */
        int n = evloop__sim_wait(loop, REAP_WAIT_NS, ev, EVLOOP__IO_EVENTS_MAX);
        if (n < 0 || evloop__clock_ns() - last >= REAP_GIVE_UP_NS) {
            loop->ops.inflight = 0; /* abandoned */
            return;
        }
        pthread_mutex_lock(&loop->io_lock);
        for (int i = 0; i < n; i++) {
            if (!(ev[i].events & EVLOOP__EV_OP))
                continue;
            loop->ops.inflight--;
            evloop__ops_result(loop, (struct evloop__op *)(uintptr_t)ev[i].tag, ev[i].res);
            last = evloop__clock_ns();
        }
        pthread_mutex_unlock(&loop->io_lock);
        run_done(loop);
    }
}

void evloop__ops_stop(evloop *loop)
{
    struct evloop__ops *o = &loop->ops;
    pthread_mutex_lock(&loop->io_lock);
    bool any = o->live > 0;
    for (int fd = 0; any && fd < o->cap; fd++) {
        struct evloop__ofd *f = &o->fds[fd];
        if (has_linked(f)) {
            mark_all(f);
            cancel_marked(loop, f);
        }
    }
    pthread_mutex_unlock(&loop->io_lock);
    if (!any)
        return;
    run_done(loop);
    reap_native(loop);
}

void evloop__ops_destroy(evloop *loop)
{
    struct evloop__ops *o = &loop->ops;
    while (o->cache) {
        struct evloop__op *op = o->cache;
        o->cache = op->next;
        free(op);
    }
    free(o->fds);
    o->fds = NULL;
    o->cap = 0;
}
