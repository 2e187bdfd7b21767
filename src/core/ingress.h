/* The build-time seam for the external queue: a multi-producer, single-consumer task
 * queue. src/variants/arena/ and src/variants/chunk/ each implement these symbols;
 * CMake compiles exactly one into a library, and the core calls them directly.
 *
 * Contract (who may call what concurrently):
 *
 *   function        | callers
 *   ----------------+------------------------------------------------------------
 *   _push           | any thread, concurrently with everything but _free
 *   _close          | any thread, concurrently with everything but _free
 *   _drain          | the consumer only (one thread at a time)
 *   _is_empty       | the consumer only
 *   _new / _free    | one thread, no other call in flight
 *
 * Ordering: pushes from one thread are drained in the order they were made; nothing a
 * push accepted (returned 0) is lost: it stays drainable after _close.
 * Wake protocol: _push ends with a seq_cst atomic operation on the word that _is_empty
 * reads with a seq_cst load, so a producer may read the loop's sleep word (seq_cst)
 * right after _push and the Dekker handshake of design.md holds. */
#ifndef EVLOOP_INGRESS_H
#define EVLOOP_INGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "evloop.h"

struct evloop__task {
    evloop_cb cb;
    void *arg;
};

struct evloop__ingress;

/* capacity: tasks the queue holds without allocating (rounded up as the variant needs). */
int evloop__ingress_new(struct evloop__ingress **out, uint32_t capacity);
void evloop__ingress_free(struct evloop__ingress *q);

/* 0, -ESHUTDOWN after _close, -ENOMEM (nothing accepted then). */
int evloop__ingress_push(struct evloop__ingress *q, evloop_cb cb, void *arg);

/* Moves up to max tasks, oldest first, into out; returns how many. May return 0 while
 * _is_empty() is false (a producer is between reserving and publishing). */
size_t evloop__ingress_drain(struct evloop__ingress *q, struct evloop__task *out, size_t max);

/* True when every accepted push has been drained. */
bool evloop__ingress_is_empty(struct evloop__ingress *q);

/* About how many tasks are waiting (claimed or pushed, not drained): a hint, read with
 * relaxed loads. Consumer only. */
size_t evloop__ingress_backlog(struct evloop__ingress *q);

/* Refuses every later push with -ESHUTDOWN. Idempotent. A push that is refused acquires
 * the close: what the closing thread did before _close() is visible to that producer. */
void evloop__ingress_close(struct evloop__ingress *q);

/* Tasks that did not fit the preallocated part (0 for a variant without one). */
uint64_t evloop__ingress_overflows(struct evloop__ingress *q);

/* "arena" or "chunk". */
const char *evloop__ingress_name(void);

#endif
