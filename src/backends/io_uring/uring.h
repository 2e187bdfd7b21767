/* Shared by the files of the io_uring backend: probe.c starts rings and finds out what this
 * kernel offers; ewait.c (readiness from an epoll set, waited for with epoll_pwait2 or with
 * IORING_OP_EPOLL_WAIT; native ops from uops.c) and mpoll.c (multishot polls, the older
 * scheme) are its two implementations, which backend.c lists under the one name "io_uring". */
#ifndef EVLOOP_URING_H
#define EVLOOP_URING_H

#include <liburing.h>
#include <linux/futex.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend.h"

/* Opcodes newer than the installed uapi header (liburing 2.3, Linux 6.1 headers). */
#define EVLOOP__OP_FUTEX_WAIT 51 /* IORING_OP_FUTEX_WAIT (Linux 6.7) */
#define EVLOOP__OP_EPOLL_WAIT 59 /* IORING_OP_EPOLL_WAIT (Linux 6.15) */

/* liburing 2.3 has no io_uring_prep_futex_wait, so the SQE is filled by hand: FUTEX_WAIT takes
 * the futex address in addr, the expected value in addr2 (off), the wake bitset in addr3 and
 * the futex2 flags in fd (FUTEX2_SIZE_U32 | FUTEX2_PRIVATE, which the 6.1 uapi headers lack);
 * len and futex_flags stay 0 (see io_futex_prep() in the kernel's io_uring/futex.c). */
static inline void evloop__uring_prep_futex(struct io_uring_sqe *sqe, const void *word,
                                            uint32_t expected)
{
    io_uring_prep_rw(EVLOOP__OP_FUTEX_WAIT, sqe, 0x02 | 128, word, 0, expected);
    sqe->addr3 = FUTEX_BITSET_MATCH_ANY;
}

/* Nor io_uring_prep_epoll_wait: EPOLL_WAIT takes the epoll fd in fd, the struct epoll_event
 * array in addr and its length in len; off, rw_flags and buf_index stay 0. It completes with
 * the number of events stored, as epoll_wait(2) with a zero timeout would, once there is one. */
static inline void evloop__uring_prep_epoll_wait(struct io_uring_sqe *sqe, int epfd, void *events,
                                                 unsigned max)
{
    io_uring_prep_rw(EVLOOP__OP_EPOLL_WAIT, sqe, epfd, events, max, 0);
}

/* The two implementations of backend "io_uring" (backend.c's table). */
extern const struct evloop__backend evloop__uring_ewait;
extern const struct evloop__backend evloop__uring_mpoll;

/* ---- uops.c: native completion operations (backend.h's contract) ---- */

/* Loop thread: an SQE, submitting what is queued when the SQ is full; NULL if none. */
struct io_uring_sqe *evloop__uring_get_sqe(struct io_uring *ring);
/* Loop thread: queues op as d describes; its CQE's user_data is the op. 0, -EINVAL, -EBUSY. */
int evloop__uring_op_start(struct io_uring *ring, struct evloop__op *op,
                           const struct evloop__op_desc *d);
/* Loop thread: queues a cancel of op; a failure of it posts a CQE with cancel_udata. */
int evloop__uring_op_cancel(struct io_uring *ring, struct evloop__op *op, uint64_t cancel_udata);
/* True when cqe is an op's completion (user_data an 8-byte aligned pointer), with *ev its
 * report; user_data of the backend's own requests must have one of the low 3 bits set. */
bool evloop__uring_op_report(const struct io_uring_cqe *cqe, struct evloop__io_event *ev);

/* ---- probe.c ---- */

/* The completion queue size: $EVLOOP_IO_URING_CQ (tests overflow a tiny CQ), else def. */
unsigned evloop__uring_cq_entries(unsigned def);

/* True when the loop's sleep word can be waited on in a ring: the futex waker, a kernel with
 * IORING_OP_FUTEX_WAIT that works, and no EVLOOP_IO_URING_WAKE=eventfd. */
bool evloop__uring_can_wait_on_word(void);

/* For ewait.c: 0 when IORING_OP_EPOLL_WAIT works on this kernel; else -ENOTSUP, the reason
 * given to evloop__backend_refused(). */
int evloop__uring_check_epoll_wait(void);

/* For ewait.c: sets up *ring with an SQ of sq_entries and a CQ of cq_entries (the SQ at most as
 * big). Returns 0 or -ENOTSUP (reason given). */
int evloop__uring_start_ewait(struct io_uring *ring, unsigned sq_entries, unsigned cq_entries);

/* For mpoll.c: sets up *ring (any thread may cancel) and probes it for the features the
 * multishot scheme needs. Returns 0 or -ENOTSUP, with the reason given. */
int evloop__uring_start(struct io_uring *ring);

#endif
