/* Shared by the files of the io_uring backend: io_uring.c is the backend (readiness from an
 * epoll set, wakes and native ops in a ring) with its wait in ring_wait.c (their shared state:
 * uring_state.h), native_ops.c turns native ops into SQEs and their CQEs into reports,
 * probe.c starts the ring and finds out what this kernel offers. */
#ifndef EVLOOP_URING_H
#define EVLOOP_URING_H

#include <liburing.h>
#include <linux/futex.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend.h"

/* An opcode newer than the installed uapi header (liburing 2.3, Linux 6.1 headers). */
#define EVLOOP__OP_FUTEX_WAIT 51 /* IORING_OP_FUTEX_WAIT (Linux 6.7) */

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

/* Backend "io_uring" (io_uring.c; backend.c's table). */
extern const struct evloop__backend evloop__backend_io_uring;

/* ---- native_ops.c: native completion operations (backend.h's contract) ---- */

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

/* Sets up *ring with an SQ of sq_entries and a CQ of cq_entries (the SQ at most as big).
 * Returns 0, or -ENOTSUP with the reason given to evloop__backend_refused(): a kernel older
 * than Linux 5.18 (EINVAL; ENOSYS without io_uring), a refusal (EPERM: seccomp, containers,
 * kernel.io_uring_disabled), valgrind. */
int evloop__uring_start(struct io_uring *ring, unsigned sq_entries, unsigned cq_entries);

#endif
