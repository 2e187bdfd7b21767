/* Starting the io_uring backend's ring and probing, for real, what this kernel offers: a ring
 * with the features the poller relies on, a NOP round trip, a synchronous cancel, and whether
 * the loop can sleep in the ring on its word (a futex wait). Containers, seccomp filters and
 * kernel.io_uring_disabled refuse io_uring_setup with EPERM; any refusal is -ENOTSUP, with the
 * reason kept for evloop_stats(). So is valgrind: it holds its lock over io_uring_enter, so
 * no other thread can run to wake a wait there. Runs once per loop, in evloop_new. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "backend.h"
#include "uring.h"
#include "sleep.h"

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define HAVE_VALGRIND_H 1
#endif
#endif

#ifndef PR_FUTEX_HASH /* Linux 6.16 */
#define PR_FUTEX_HASH 78
#define PR_FUTEX_HASH_GET_SLOTS 2
#endif
#define SQ_ENTRIES 64u
#define CQ_ENTRIES 1024u
#define PROBE_UDATA 1u /* the ring has no other request yet */

/* Submits sqe, the one SQE queued, and returns its result. */
static int round_trip(struct io_uring *ring, struct io_uring_sqe *sqe)
{
    struct io_uring_cqe *cqe;
    struct __kernel_timespec ts = {.tv_sec = 1};
    io_uring_sqe_set_data64(sqe, PROBE_UDATA);
    int r = io_uring_submit(ring);
    if (r >= 0)
        r = io_uring_wait_cqe_timeout(ring, &cqe, &ts);
    if (r == -ETIME) { /* the request may point at the caller's stack */
        struct io_uring_sync_cancel_reg reg = {.addr = PROBE_UDATA, .timeout = {-1, -1}};
        io_uring_register_sync_cancel(ring, &reg);
    }
    if (r < 0)
        return r;
    r = cqe->res;
    io_uring_cqe_seen(ring, cqe);
    return r;
}

static void *nothing(void *arg)
{
    return arg;
}

/* Linux 6.16+ keeps the futex waits of a single-threaded process in the global futex hash; the
 * first thread it creates moves private futexes to a per-process hash, and a wake then misses
 * a futex wait the ring armed before. One short-lived thread makes that hash exist for good.
 * prctl returns 0 slots while the global hash is in use, -1 on kernels without the choice. */
static bool private_futex_hash_ready(void)
{
    pthread_t t;
    if (prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_GET_SLOTS, 0, 0, 0) != 0)
        return true;
    if (pthread_create(&t, NULL, nothing, NULL) != 0)
        return false;
    pthread_join(t, NULL);
    return prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_GET_SLOTS, 0, 0, 0) != 0;
}

/* The loop's wake word is a futex only with the futex waker; the ring must know the opcode,
 * and a probe wait on a word that does not hold the expected value must fail at once. */
static bool can_wait_on_word(struct io_uring *ring)
{
    const char *env = getenv("EVLOOP_IO_URING_WAKE"); /* "eventfd": tests of the other wake */
    if (strcmp(evloop__waker_name(), "futex") != 0 || (env && strcmp(env, "eventfd") == 0))
        return false;
    struct io_uring_probe *p = io_uring_get_probe_ring(ring);
    bool has = p && io_uring_opcode_supported(p, EVLOOP__OP_FUTEX_WAIT);
    io_uring_free_probe(p);
    if (!has || !private_futex_hash_ready())
        return false;
    uint32_t word = EVLOOP__AWAKE;
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    evloop__uring_prep_futex(sqe, &word, EVLOOP__SLEEP_WORD);
    return round_trip(ring, sqe) == -EAGAIN;
}

/* The poller needs overflowing CQEs kept (NODROP), timed waits without a timeout SQE
 * (EXT_ARG, so the loop alone touches the SQ), CQE_SKIP_SUCCESS, and synchronous cancels. */
static int probe(struct io_uring *ring, unsigned features)
{
    unsigned need = IORING_FEAT_NODROP | IORING_FEAT_EXT_ARG | IORING_FEAT_CQE_SKIP;
    if ((features & need) != need)
        return evloop__backend_refused("io_uring features", ENOSYS);
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    io_uring_prep_nop(sqe);
    int r = round_trip(ring, sqe);
    if (r != 0)
        return evloop__backend_refused("io_uring NOP", r < 0 ? -r : EIO);
    struct io_uring_sync_cancel_reg none = {.addr = PROBE_UDATA, .timeout = {-1, -1}};
    r = io_uring_register_sync_cancel(ring, &none);
    if (r != -ENOENT)
        return evloop__backend_refused("IORING_REGISTER_SYNC_CANCEL", r < 0 ? -r : EIO);
    return 0;
}

static bool under_valgrind(void)
{
#ifdef HAVE_VALGRIND_H
    return RUNNING_ON_VALGRIND;
#else
    return false;
#endif
}

int evloop__uring_start(struct io_uring *ring, bool *word_wait)
{
    if (under_valgrind())
        return evloop__backend_refused("under valgrind", EDEADLK);
    const char *env = getenv("EVLOOP_IO_URING_CQ"); /* tests overflow a tiny CQ */
    unsigned cq = env && atoi(env) > 0 ? (unsigned)atoi(env) : CQ_ENTRIES;
    struct io_uring_params p = {.flags = IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP |
                                         IORING_SETUP_SUBMIT_ALL,
                                .cq_entries = cq};
    int r = io_uring_queue_init_params(cq < SQ_ENTRIES ? cq : SQ_ENTRIES, ring, &p);
    if (r < 0)
        return evloop__backend_refused("io_uring_setup", -r);
    r = probe(ring, p.features);
    if (r < 0)
        io_uring_queue_exit(ring);
    else
        *word_wait = can_wait_on_word(ring);
    return r;
}
