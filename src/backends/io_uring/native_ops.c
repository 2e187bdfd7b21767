/* Native completion operations of backend "io_uring" (io_uring.c): accept, recv and send as SQEs,
 * submitted with the next wait's enter, their CQEs turned into the reports backend.h's
 * contract asks for ({tag = the op, events = EVLOOP__EV_OP, res}), and cancel as an
 * ASYNC_CANCEL SQE keyed by the op. The core finishes short sends and keeps the order.
 * Kernels: all of it is older than the ring's Linux 5.18 (probe.c): ACCEPT 5.5, SEND and
 * RECV 5.6, IOSQE_CQE_SKIP_SUCCESS 5.17.
 *
 * Traps of the OS API:
 *  a. An accept, recv or send on a socket with nothing to do arms an internal poll and
 *     completes later, also on an O_NONBLOCK socket: -EAGAIN never comes back (checked on 6.18).
 *  b. Accepted fds must be non-blocking and close-on-exec: accept4 flags in the SQE.
 *  c. A send to a peer that has gone raises SIGPIPE unless MSG_NOSIGNAL.
 *  d. A cancel queued behind its op in the same submission finds it (SQEs are issued in
 *     order); one that finds nothing (the op has completed) fails with -ENOENT, and its CQE
 *     is the only one it posts (IOSQE_CQE_SKIP_SUCCESS): the op's own CQE always comes.
 *  e. The SQ is drained only by an enter: a full SQ is submitted at once (the loop thread
 *     is the only one that touches it; its completions stay in the CQ for the next wait). */
#include <errno.h>
#include <sys/socket.h>

#include "uring.h"

/* Loop thread: an SQE, submitting what is queued when the SQ is full (trap e). */
struct io_uring_sqe *evloop__uring_get_sqe(struct io_uring *ring)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    if (!sqe && io_uring_submit(ring) >= 0)
        sqe = io_uring_get_sqe(ring);
    return sqe;
}

int evloop__uring_op_start(struct io_uring *ring, struct evloop__op *op,
                           const struct evloop__op_desc *d)
{
    if (d->kind != EVLOOP__OP_ACCEPT && d->kind != EVLOOP__OP_RECV && d->kind != EVLOOP__OP_SEND)
        return -EINVAL;
    struct io_uring_sqe *sqe = evloop__uring_get_sqe(ring);
    if (!sqe)
        return -EBUSY;
    if (d->kind == EVLOOP__OP_ACCEPT)
        io_uring_prep_accept(sqe, d->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC); /* trap b */
    else if (d->kind == EVLOOP__OP_RECV)
        io_uring_prep_recv(sqe, d->fd, d->buf, d->len, 0);
    else
        io_uring_prep_send(sqe, d->fd, d->buf, d->len, MSG_NOSIGNAL); /* trap c */
    io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)op);
    return 0;
}

int evloop__uring_op_cancel(struct io_uring *ring, struct evloop__op *op, uint64_t cancel_udata)
{
    struct io_uring_sqe *sqe = evloop__uring_get_sqe(ring);
    if (!sqe)
        return -EBUSY;
    io_uring_prep_cancel64(sqe, (uint64_t)(uintptr_t)op, 0); /* trap d */
    io_uring_sqe_set_data64(sqe, cancel_udata);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
    return 0;
}

bool evloop__uring_op_report(const struct io_uring_cqe *cqe, struct evloop__io_event *ev)
{
    if (cqe->user_data == 0 || (cqe->user_data & 7) != 0)
        return false; /* not an op: ops are 8-byte aligned pointers */
    *ev = (struct evloop__io_event){cqe->user_data, EVLOOP__EV_OP, cqe->res};
    return true;
}
