/* Starting the io_uring backend's ring and probing, for real, what this kernel offers: a ring
 * with the setup flags and features io_uring.c relies on (Linux 5.18: SUBMIT_ALL, EXT_ARG;
 * COOP_TASKRUN where the kernel has it, 5.19), and whether the loop can sleep in the ring on
 * its word (a futex wait, 6.7). Older kernels refuse the setup with EINVAL (ENOSYS before
 * 5.1); containers, seccomp filters and kernel.io_uring_disabled refuse it with EPERM; any
 * refusal is -ENOTSUP, with the reason kept for evloop_stats(). So is valgrind: it holds its
 * lock over io_uring_enter, so no other thread can run to wake a wait there. The futex round
 * trip runs once per process, on a ring of its own; the rest once per loop. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "sleep.h"
#include "uring.h"

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

static bool opcode_known(struct io_uring *ring, int op)
{
    struct io_uring_probe *p = io_uring_get_probe_ring(ring);
    bool has = p && io_uring_opcode_supported(p, op);
    io_uring_free_probe(p);
    return has;
}

/* ---- what the kernel offers: once per process ------------------------------------------ */

struct kernel_ops {
    bool known;      /* probed: the fields below hold */
    bool futex_wait; /* IORING_OP_FUTEX_WAIT fails at once on a word that changed */
};

static pthread_mutex_t ops_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kernel_ops ops_found; /* under ops_lock */

static bool probe_futex_wait(struct io_uring *ring)
{
    if (!opcode_known(ring, EVLOOP__OP_FUTEX_WAIT))
        return false;
    uint32_t word = EVLOOP__AWAKE;
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    evloop__uring_prep_futex(sqe, &word, EVLOOP__SLEEP_WORD);
    return round_trip(ring, sqe) == -EAGAIN;
}

/* Fills *out from a ring of its own the first time it can be set up; a refusal (seccomp,
 * EMFILE) is not remembered, so it is asked again next time. Returns 0 or -errno. */
static int kernel_ops(struct kernel_ops *out)
{
    pthread_mutex_lock(&ops_lock);
    int r = 0;
    if (!ops_found.known) {
        struct io_uring ring;
        r = io_uring_queue_init(4, &ring, 0);
        if (r == 0) {
            ops_found.futex_wait = probe_futex_wait(&ring);
            ops_found.known = true;
            io_uring_queue_exit(&ring);
        }
    }
    *out = ops_found;
    pthread_mutex_unlock(&ops_lock);
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

bool evloop__uring_can_wait_on_word(void)
{
    const char *env = getenv("EVLOOP_IO_URING_WAKE"); /* "eventfd": tests of the other wake */
    if (strcmp(evloop__waker_name(), "futex") != 0 || (env && strcmp(env, "eventfd") == 0))
        return false;
    struct kernel_ops k;
    return kernel_ops(&k) == 0 && k.futex_wait && private_futex_hash_ready();
}

/* ---- the ring ----------------------------------------------------------------------------- */

static bool under_valgrind(void)
{
#ifdef HAVE_VALGRIND_H
    return RUNNING_ON_VALGRIND;
#else
    return false;
#endif
}

unsigned evloop__uring_cq_entries(unsigned def)
{
    const char *env = getenv("EVLOOP_IO_URING_CQ");
    return env && atoi(env) > 0 ? (unsigned)atoi(env) : def;
}

/* The errno the last refusal on this thread gave, from setup(). */
static _Thread_local int last_refusal;

static bool refused_with(int err)
{
    return last_refusal == err;
}

static int setup(struct io_uring *ring, unsigned flags, unsigned sq, unsigned cq,
                 unsigned *features)
{
    last_refusal = EDEADLK;
    if (under_valgrind())
        return evloop__backend_refused("under valgrind", EDEADLK);
    struct io_uring_params p = {.flags = flags | IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP |
                                         IORING_SETUP_SUBMIT_ALL,
                                .cq_entries = cq};
    int r = io_uring_queue_init_params(cq < sq ? cq : sq, ring, &p);
    last_refusal = r < 0 ? -r : 0;
    if (r < 0)
        return evloop__backend_refused("io_uring_setup", -r);
    *features = p.features;
    return 0;
}

int evloop__uring_start(struct io_uring *ring, unsigned sq_entries, unsigned cq_entries)
{
    /* Completions are task work: COOP_TASKRUN (5.19) runs it at the loop thread's next entry
     * into the kernel instead of interrupting the thread (an IPI) for each; TASKRUN_FLAG says
     * when it is pending, so io_uring_peek_batch_cqe enters to run it: a ring server spends
     * less CPU per request (tournament/results/design-figures.md, "Backends"). SUBMIT_ALL
     * (5.18: an SQE that fails does not hold back those queued after it) sets the oldest
     * kernel: an older one refuses both setups with EINVAL (test_fallback.c plays that). */
    unsigned features = 0, coop = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
    int r = setup(ring, coop, sq_entries, cq_entries, &features);
    if (r < 0 && refused_with(EINVAL))
        r = setup(ring, 0, sq_entries, cq_entries, &features);
    if (r == 0 && !(features & IORING_FEAT_EXT_ARG)) { /* timed waits without a timeout SQE */
        io_uring_queue_exit(ring);
        r = evloop__backend_refused("io_uring features", ENOSYS);
    }
    return r;
}
