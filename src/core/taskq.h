/* A growable FIFO ring of tasks for one thread (the loop thread): no atomics, no locks.
 * Holds the owner-local queue, the loop-thread internal queue and the microtasks. It
 * only allocates when it grows (doubling), so a steady load allocates nothing. */
#ifndef EVLOOP_TASKQ_H
#define EVLOOP_TASKQ_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "ingress.h"

struct evloop__taskq {
    struct evloop_task *buf;
    uint32_t mask; /* capacity - 1; capacity is a power of two */
    uint32_t head, tail;
};

static inline int evloop__taskq_init(struct evloop__taskq *q, uint32_t capacity)
{
    q->buf = malloc(capacity * sizeof(*q->buf));
    q->mask = capacity - 1;
    q->head = q->tail = 0;
    return q->buf ? 0 : -ENOMEM;
}

static inline void evloop__taskq_destroy(struct evloop__taskq *q)
{
    free(q->buf);
    q->buf = NULL;
}

static inline uint32_t evloop__taskq_count(const struct evloop__taskq *q)
{
    return q->tail - q->head;
}

static inline bool evloop__taskq_is_empty(const struct evloop__taskq *q)
{
    return q->tail == q->head;
}

/* Doubles the ring, keeping the order. */
static inline int evloop__taskq_grow(struct evloop__taskq *q)
{
    uint32_t cap = q->mask + 1, count = evloop__taskq_count(q);
    if (cap > UINT32_MAX / 2)
        return -ENOMEM;
    struct evloop_task *buf = malloc(2 * (size_t)cap * sizeof(*buf));
    if (!buf)
        return -ENOMEM;
    for (uint32_t i = 0; i < count; i++)
        buf[i] = q->buf[(q->head + i) & q->mask];
    free(q->buf);
    q->buf = buf;
    q->mask = 2 * cap - 1;
    q->head = 0;
    q->tail = count;
    return 0;
}

static inline int evloop__taskq_push(struct evloop__taskq *q, evloop_cb cb, void *arg)
{
    if (evloop__taskq_count(q) == q->mask + 1) {
        int r = evloop__taskq_grow(q);
        if (r < 0)
            return r;
    }
    q->buf[q->tail++ & q->mask] = (struct evloop_task){cb, arg};
    return 0;
}

/* Drops the newest tasks until count tasks are left (undoes pushes; count <= the count). */
static inline void evloop__taskq_truncate(struct evloop__taskq *q, uint32_t count)
{
    q->tail = q->head + count;
}

static inline bool evloop__taskq_pop(struct evloop__taskq *q, struct evloop_task *out)
{
    if (q->head == q->tail)
        return false;
    *out = q->buf[q->head++ & q->mask];
    return true;
}

#endif
