/* The build-time seam for the external queue: a multi-producer, single-consumer task
 * queue. src/variants/arena/ (per-producer lanes) and src/variants/chunk/ (mutex + chunk
 * pool) each implement these symbols; CMake compiles exactly one into a library, and the
 * core calls them directly.
 *
 * Contract (who may call what concurrently):
 *
 *   function              | callers
 *   ----------------------+------------------------------------------------------------
 *   _push, _push_batch    | any thread but the consumer, concurrently with all but _free
 *   _close                | any thread, concurrently with everything but _free
 *   _drain, _is_empty,    | the consumer only (one thread at a time)
 *   _backlog, _fenced,    |
 *   _wants_fence          |
 *   _new / _free          | one thread, no other call in flight
 *
 * Ordering: pushes from one thread are drained in the order they were made, within and
 * across batches; nothing a push accepted (returned 0) is lost: it stays drainable after
 * _close, and once _close has returned every push either was refused or is drainable.
 *
 * Wake protocol (sleep.h): a push publishes with release stores and no full fence; its
 * return value says whether the caller must then call evloop__sleep_notify():
 *   - arena: always; notify's light barrier orders the publication before its read of the
 *     sleep word, against the loop's heavy barrier;
 *   - chunk: only when the push read the sleep word (word, given at _new) other than AWAKE
 *     inside the queue's mutex, after it published there. The loop, after it stores its
 *     sleep value, takes and releases the same mutex in _fenced() before its re-check, so
 *     the mutex's order does what the barriers do: either the push's critical section came
 *     first and the re-check sees it, or the loop's did and the push reads the sleep value
 *     (tests/model/chunk.pml). No fence on either side.
 * The consumer announces sleep (heavy barrier where needed), calls _fenced(), then
 * _is_empty(): a push that did not ask for a notify, or whose notify read AWAKE, is seen
 * there. fence is the loop's barrier mode (barrier.h), fixed at _new. */
#ifndef EVLOOP_INGRESS_H
#define EVLOOP_INGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "barrier.h"
#include "evloop.h"

struct evloop__ingress;

/* capacity: tasks the queue holds without allocating (rounded up as the variant needs).
 * word: the consumer's sleep word (sleep.h), which chunk's pushes read under the mutex;
 * NULL: every push asks for a notify. notify(notify_arg), when not NULL, wakes the loop as
 * evloop__sleep_notify() does: the variant calls it after announcing work outside a push
 * (arena: the lane of a thread that exits, announced by the thread's destructor, whose lane
 * the loop may have let go of). */
int evloop__ingress_new(struct evloop__ingress **out, uint32_t capacity, enum evloop__fence fence,
                        const _Atomic uint32_t *word, void (*notify)(void *), void *notify_arg);
void evloop__ingress_free(struct evloop__ingress *q);

/* What an accepted push asks of its caller (the wake protocol above). */
enum {
    EVLOOP__PUSHED = 0,        /* nothing: the loop is awake and its re-check will see it */
    EVLOOP__PUSHED_NOTIFY = 1, /* call evloop__sleep_notify() */
};

/* EVLOOP__PUSHED or EVLOOP__PUSHED_NOTIFY; -ESHUTDOWN after _close, -ENOMEM (nothing
 * accepted then). */
int evloop__ingress_push(struct evloop__ingress *q, evloop_cb cb, void *arg);

/* All n tasks (n >= 1, every cb non-NULL), in order, with one publication; all accepted
 * or none. Returns as _push. */
int evloop__ingress_push_batch(struct evloop__ingress *q, const struct evloop_task *tasks,
                               size_t n);

/* Moves up to max tasks into out; returns how many. Each producer's tasks come oldest
 * first. May return 0 while _is_empty() is false (a publication not visible yet). */
size_t evloop__ingress_drain(struct evloop__ingress *q, struct evloop_task *out, size_t max);

/* True when every push published before the consumer's last heavy barrier (or fence) has
 * been drained, and nothing newer is visible. Arena: false also when it just took a lane
 * from the announce stack, drained or not (arena.c says why); asked again with nothing
 * pushed meanwhile, the answer is exact. */
bool evloop__ingress_is_empty(struct evloop__ingress *q);

/* Producer, right after a push of its own that found the loop asleep and woke it (the
 * push's evloop__sleep_notify() said so). Arena: the calling thread's lane counts it and,
 * when its pushes keep waking the loop, switches to fenced pushes (arena.c); chunk: nothing. */
void evloop__ingress_woke(struct evloop__ingress *q);

/* About how many tasks are waiting: a hint, read with relaxed loads. */
size_t evloop__ingress_backlog(struct evloop__ingress *q);

/* The consumer has just stored its sleep value and executed its barrier (announce or park,
 * sleep.h), or a heavy barrier in a busy loop: state it kept because a producer might not
 * yet see its stores (arena: lanes on probation) can be settled. Chunk: takes and releases
 * the mutex, which orders the pushes' wake decisions against the sleep value. */
void evloop__ingress_fenced(struct evloop__ingress *q);

/* Consumer, after a full fence, about to sleep: false when no push can be published with
 * only the light barrier and go unseen by the re-check, so the loop may skip its heavy
 * barrier. Arena: no lane is in the work list (none active, on probation or handed): every
 * lane is new, whose first push fences in full, or was let go after a heavy barrier, so
 * its next push finds announced 0 and exchanges it, a full barrier (x86; elsewhere a fence
 * follows the exchange). Chunk: always false (its pushes order their wake by the mutex). */
bool evloop__ingress_needs_heavy(struct evloop__ingress *q);

/* True when the variant would like a heavy barrier soon (arena: many lanes on probation,
 * which every drain re-checks until one comes). The loop then calls the barrier and
 * _fenced(). */
bool evloop__ingress_wants_fence(struct evloop__ingress *q);

/* Refuses every later push with -ESHUTDOWN. Idempotent. Returns once every push that
 * raced it is either refused or published. */
void evloop__ingress_close(struct evloop__ingress *q);

/* Tasks or segments that did not fit the preallocated part (0 for none). */
uint64_t evloop__ingress_overflows(struct evloop__ingress *q);

/* Producer lanes registered now (arena; 0 for a variant without lanes). */
uint64_t evloop__ingress_lanes(struct evloop__ingress *q);

/* "arena" or "chunk". */
const char *evloop__ingress_name(void);

/* Why this variant's loops take the seq_cst fence when the config says auto (barrier.h),
 * or NULL to take membarrier where the kernel allows it. */
const char *evloop__ingress_auto_seq_cst(void);

#endif
