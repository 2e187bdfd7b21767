/* Shared by the two files of the io_uring backend: io_uring.c, the poller, and probe.c, which
 * starts the ring and finds out what this kernel offers. */
#ifndef EVLOOP_URING_H
#define EVLOOP_URING_H

#include <liburing.h>
#include <linux/futex.h>
#include <stdbool.h>
#include <stdint.h>

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

/* Sets up *ring (a CQ of $EVLOOP_IO_URING_CQ entries, 1024 by default) and probes it for real.
 * Returns 0, with *word_wait set when the loop can sleep here on its word (the futex waker,
 * IORING_OP_FUTEX_WAIT, and no EVLOOP_IO_URING_WAKE=eventfd), or -ENOTSUP, with the reason
 * given to evloop__backend_refused(). */
int evloop__uring_start(struct io_uring *ring, bool *word_wait);

#endif
