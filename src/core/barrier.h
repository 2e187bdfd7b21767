/* The asymmetric fence pair of the wake and close handshakes (docs/design.md, "Fences").
 *
 * A producer publishes (a plain release store), then reads a word the loop writes (the
 * sleep word, a lane's `announced`, the queue's `closed`): a store followed by a load,
 * which every CPU may reorder. Either each such producer pays a full fence (FENCE_SEQ_CST),
 * or the loop, on the rare side (about to sleep, closing), makes every running thread of
 * the process execute one with membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) and producers
 * pay only a compiler barrier (FENCE_MEMBARRIER). The same pairing is used by folly's
 * asymmetricLightBarrier/HeavyBarrier, liburcu and Seastar.
 *
 *   call                  | who              | FENCE_MEMBARRIER          | FENCE_SEQ_CST
 *   ----------------------+------------------+---------------------------+----------------
 *   evloop__barrier_light | producers        | compiler barrier          | seq_cst fence
 *   evloop__barrier_heavy | loop, closer     | membarrier() (a few us)   | seq_cst fence
 *
 * Rule: a producer's [store; light; load] and the loop's [store; heavy; load] never both
 * miss the other's store. The mode is chosen once per loop (evloop__barrier_choose) and
 * never changes while the loop lives. */
#ifndef EVLOOP_BARRIER_H
#define EVLOOP_BARRIER_H

#include <stdatomic.h>
#include <stddef.h>

#include "common.h"

enum evloop__fence {
    EVLOOP__FENCE_MEMBARRIER = 0, /* producers: compiler barrier; loop: membarrier() */
    EVLOOP__FENCE_SEQ_CST = 1,    /* both sides: a seq_cst fence */
};

/* A full seq_cst fence. ThreadSanitizer does not model standalone fences (gcc rejects them
 * with -Wtsan), so there it is a seq_cst read-modify-write of one process-wide word: a full
 * barrier in hardware too, and every such fence falls in the word's one total order. */
#if EVLOOP__TSAN
extern _Atomic unsigned evloop__tsan_fence_word;
static inline void evloop__fence(void)
{
    atomic_fetch_add(&evloop__tsan_fence_word, 0);
}
#else
static inline void evloop__fence(void)
{
    atomic_thread_fence(memory_order_seq_cst);
}
#endif

static inline void evloop__barrier_light(enum evloop__fence fence)
{
    if (fence == EVLOOP__FENCE_SEQ_CST)
        evloop__fence();
    else
        atomic_signal_fence(memory_order_seq_cst);
}

/* Any thread of the process. */
void evloop__barrier_heavy(enum evloop__fence fence);

/* Picks the mode for a new loop: request is the config's value (NULL or "auto",
 * "membarrier", "seq_cst"), overridden by $EVLOOP_FENCE when the config says auto; auto is
 * seq_cst when auto_seq_cst (the ingress variant's reason to prefer it, ingress.h) is not
 * NULL, else membarrier where the kernel allows it. The first membarrier choice registers
 * the process (MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) once. Returns 0 with *fence and
 * *why set (why: "" or why membarrier is not used), or -EINVAL (unknown name) or -ENOTSUP
 * ("membarrier" asked for and not available). */
int evloop__barrier_choose(const char *request, const char *auto_seq_cst,
                           enum evloop__fence *fence, const char **why);

/* "membarrier" or "seq_cst". */
const char *evloop__barrier_name(enum evloop__fence fence);

#endif
