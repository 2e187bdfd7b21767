/* The task queue of the libev and libuv baselines: the idiomatic cross-thread pattern of
 * both libraries, a mutex-protected array that producers append to (then they call
 * ev_async_send / uv_async_send) and that the async callback swaps out whole under the
 * lock and runs outside it. Two arrays are swapped back and forth, so a steady state
 * allocates nothing: the baselines get the fastest honest version of their pattern. */
#ifndef BENCH_LOCKED_QUEUE_H
#define BENCH_LOCKED_QUEUE_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "system.h"

struct lq_task {
    bench_cb cb;
    void *arg;
};

struct locked_queue {
    pthread_mutex_t mu;
    struct lq_task *items; /* producers append here, under mu */
    size_t len, cap;
    bool stopping;         /* under mu: stop() was called */
    struct lq_task *spare; /* the consumer's array, swapped in on each drain */
    size_t spare_cap;
    _Atomic uint64_t tasks, drains; /* written by the loop thread, read by stats() */
};

static inline int lq_init(struct locked_queue *q)
{
    q->items = NULL;
    q->len = q->cap = 0;
    q->stopping = false;
    q->spare = NULL;
    q->spare_cap = 0;
    atomic_init(&q->tasks, 0);
    atomic_init(&q->drains, 0);
    return -pthread_mutex_init(&q->mu, NULL);
}

static inline void lq_destroy(struct locked_queue *q)
{
    pthread_mutex_destroy(&q->mu);
    free(q->items);
    free(q->spare);
}

/* Any thread. Returns 0 or -ENOMEM (nothing queued then). */
static inline int lq_push(struct locked_queue *q, bench_cb cb, void *arg)
{
    pthread_mutex_lock(&q->mu);
    if (q->len == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 1024;
        struct lq_task *items = realloc(q->items, cap * sizeof(*items));
        if (!items) {
            pthread_mutex_unlock(&q->mu);
            return -ENOMEM;
        }
        q->items = items;
        q->cap = cap;
    }
    q->items[q->len].cb = cb;
    q->items[q->len].arg = arg;
    q->len++;
    pthread_mutex_unlock(&q->mu);
    return 0;
}

/* Any thread: marks the queue stopping. */
static inline void lq_mark_stopping(struct locked_queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->stopping = true;
    pthread_mutex_unlock(&q->mu);
}

/* Loop thread, from the async callback: takes everything queued in O(1) under the lock
 * and runs it outside. Returns true when stop() was called and nothing is left, so the
 * caller should end its loop. Tasks queued while these run are left for the next
 * callback (their producer's async_send makes sure it comes). */
static inline bool lq_drain(struct locked_queue *q)
{
    pthread_mutex_lock(&q->mu);
    struct lq_task *batch = q->items;
    size_t n = q->len, cap = q->cap;
    q->items = q->spare;
    q->cap = q->spare_cap;
    q->len = 0;
    pthread_mutex_unlock(&q->mu);

    for (size_t i = 0; i < n; i++)
        batch[i].cb(batch[i].arg);
    q->spare = batch;
    q->spare_cap = cap;
    atomic_store_explicit(&q->tasks, atomic_load_explicit(&q->tasks, memory_order_relaxed) + n,
                          memory_order_relaxed);
    if (n > 0)
        atomic_store_explicit(&q->drains,
                              atomic_load_explicit(&q->drains, memory_order_relaxed) + 1,
                              memory_order_relaxed);

    pthread_mutex_lock(&q->mu);
    bool done = q->stopping && q->len == 0;
    pthread_mutex_unlock(&q->mu);
    return done;
}

/* Any thread: the stats of a baseline built on this queue (bench_system.stats). Tasks and
 * drains are the queue's; the rest does not apply (no wake count of their own: the
 * harness counts eventfd writes instead; no spinning, no batch budget). */
static inline void lq_stats(struct locked_queue *q, struct bench_loop_stats *out)
{
    out->tasks = atomic_load_explicit(&q->tasks, memory_order_relaxed);
    out->drains = atomic_load_explicit(&q->drains, memory_order_relaxed);
    out->wakes = -1;
    out->spin_hits = -1;
    out->membarriers = -1;
    out->budget = 0;
    out->spin_ns = -1;
}

#endif
