/* Ingress variant "chunk": a mutex-protected list of fixed-size chunks with a chunk
 * pool. Implements ingress.h. A producer appends under the mutex; the consumer takes the
 * whole list under the mutex in O(1) and hands its tasks out without the lock, so the
 * lock is held for a few stores on either side. Emptied chunks go back to the pool at
 * the next take: no allocation per push in steady state.
 *
 * `pushed` counts accepted tasks and `taken` counts tasks handed out; the queue is
 * empty when they are equal. A push costs one uncontended lock and nothing else: pushed
 * is a plain store under the mutex, and the wake handshake's ordering comes from the
 * caller's evloop__sleep_notify() (its light barrier) against the loop's heavy barrier,
 * as for the arena variant (sleep.h). A batch takes the lock once. */
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "barrier.h"
#include "common.h"
#include "ingress.h"

#define CHUNK_TASKS 128

struct chunk {
    struct chunk *next;
    uint32_t count;
    struct evloop_task tasks[CHUNK_TASKS];
};

struct evloop__ingress {
    alignas(EVLOOP_CACHELINE) pthread_mutex_t mu;
    struct chunk *head, *tail, *pool; /* under mu */
    bool closed;                      /* under mu */
    /* Its own line: the consumer polls it, and must not pull the mutex's line away from
     * a producer each time it looks. */
    alignas(EVLOOP_CACHELINE) _Atomic uint64_t pushed; /* written under mu */
    _Atomic uint32_t ever; /* set by the first push (evloop__ingress_needs_heavy) */
    alignas(EVLOOP_CACHELINE) uint64_t taken;          /* consumer only from here on */
    struct chunk *cur;                        /* the list taken last, oldest first */
    uint32_t cur_pos;
    struct chunk *spare; /* emptied chunks, returned to the pool at the next take */
    _Atomic uint64_t overflows;
};

int evloop__ingress_new(struct evloop__ingress **out, uint32_t capacity, enum evloop__fence fence,
                        void (*notify)(void *), void *notify_arg)
{
    /* The mutex orders pushes against close; the caller's notify orders the wake; nothing
     * is announced outside a push. */
    (void)fence;
    (void)notify;
    (void)notify_arg;
    struct evloop__ingress *q = aligned_alloc(EVLOOP_CACHELINE, sizeof(*q));
    if (!q)
        return -ENOMEM;
    *q = (struct evloop__ingress){0};
    /* Adaptive: the critical sections are a few stores, so a contended lock is better
     * spun on briefly than slept on (glibc extension; a plain mutex elsewhere). */
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
#endif
    pthread_mutex_init(&q->mu, &attr);
    pthread_mutexattr_destroy(&attr);
    /* Preallocate the pool so the first `capacity` tasks need no allocation. */
    for (uint32_t i = 0; i < (capacity + CHUNK_TASKS - 1) / CHUNK_TASKS; i++) {
        struct chunk *c = malloc(sizeof(*c));
        if (!c) {
            evloop__ingress_free(q);
            return -ENOMEM;
        }
        c->next = q->pool;
        q->pool = c;
    }
    *out = q;
    return 0;
}

static void free_chunks(struct chunk *c)
{
    while (c) {
        struct chunk *next = c->next;
        free(c);
        c = next;
    }
}

void evloop__ingress_free(struct evloop__ingress *q)
{
    if (!q)
        return;
    free_chunks(q->head);
    free_chunks(q->pool);
    free_chunks(q->cur);
    free_chunks(q->spare);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

/* Under mu: appends an empty chunk, from the pool or the heap; NULL when out of memory. */
static struct chunk *append_chunk(struct evloop__ingress *q)
{
    struct chunk *c = q->pool;
    if (c) {
        q->pool = c->next;
    } else {
        c = malloc(sizeof(*c));
        if (!c)
            return NULL;
        atomic_fetch_add_explicit(&q->overflows, 1, memory_order_relaxed);
    }
    c->next = NULL;
    c->count = 0;
    if (q->tail)
        q->tail->next = c;
    else
        q->head = c;
    q->tail = c;
    return c;
}

/* Under mu: a chunk with room at the tail. */
static struct chunk *tail_with_room(struct evloop__ingress *q)
{
    struct chunk *c = q->tail;
    return c && c->count < CHUNK_TASKS ? c : append_chunk(q);
}

/* Under mu, after a push: the queue's first push ever marks it and fences in full, so the
 * loop may skip its heavy barrier until then (evloop__ingress_needs_heavy). */
static void first_push(struct evloop__ingress *q)
{
    if (atomic_load_explicit(&q->ever, memory_order_relaxed))
        return;
    atomic_store(&q->ever, 1); /* seq_cst: pairs with the load in needs_heavy */
    evloop__fence();
}

int evloop__ingress_push_batch(struct evloop__ingress *q, const struct evloop_task *tasks,
                               size_t n)
{
    pthread_mutex_lock(&q->mu);
    if (q->closed) {
        pthread_mutex_unlock(&q->mu);
        return -ESHUTDOWN;
    }
    /* All or none: the chunks a batch needs are found before any task is written. */
    struct chunk *first = q->tail, *c = first;
    size_t room = c ? CHUNK_TASKS - c->count : 0;
    while (room < n) {
        if (!append_chunk(q)) {
            pthread_mutex_unlock(&q->mu);
            return -ENOMEM; /* the empty chunks stay linked and serve the next push */
        }
        room += CHUNK_TASKS;
    }
    c = first && first->count < CHUNK_TASKS ? first : (first ? first->next : q->head);
    for (size_t i = 0; i < n; i++) {
        if (c->count == CHUNK_TASKS)
            c = c->next;
        c->tasks[c->count++] = tasks[i];
    }
    /* relaxed: written under mu; the consumer takes the tasks themselves under mu. */
    atomic_store_explicit(&q->pushed, atomic_load_explicit(&q->pushed, memory_order_relaxed) + n,
                          memory_order_relaxed);
    first_push(q);
    pthread_mutex_unlock(&q->mu);
    return 0;
}

int evloop__ingress_push(struct evloop__ingress *q, evloop_cb cb, void *arg)
{
    pthread_mutex_lock(&q->mu);
    if (q->closed) {
        pthread_mutex_unlock(&q->mu);
        return -ESHUTDOWN;
    }
    struct chunk *c = tail_with_room(q);
    if (!c) {
        pthread_mutex_unlock(&q->mu);
        return -ENOMEM;
    }
    c->tasks[c->count++] = (struct evloop_task){cb, arg};
    /* relaxed: written under mu; the consumer takes the tasks themselves under mu. */
    atomic_store_explicit(&q->pushed, atomic_load_explicit(&q->pushed, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    first_push(q);
    pthread_mutex_unlock(&q->mu);
    return 0;
}

static void take_list(struct evloop__ingress *q)
{
    pthread_mutex_lock(&q->mu);
    if (q->spare) {
        struct chunk *last = q->spare;
        while (last->next)
            last = last->next;
        last->next = q->pool;
        q->pool = q->spare;
        q->spare = NULL;
    }
    q->cur = q->head;
    q->cur_pos = 0;
    q->head = q->tail = NULL;
    pthread_mutex_unlock(&q->mu);
}

size_t evloop__ingress_drain(struct evloop__ingress *q, struct evloop_task *out, size_t max)
{
    size_t n = 0;
    while (n < max) {
        if (!q->cur) {
            if (evloop__ingress_is_empty(q))
                break;
            take_list(q);
            if (!q->cur)
                break;
        }
        struct chunk *c = q->cur;
        size_t first = n;
        while (n < max && q->cur_pos < c->count)
            out[n++] = c->tasks[q->cur_pos++];
        q->taken += n - first;
        if (q->cur_pos == c->count) {
            q->cur = c->next;
            q->cur_pos = 0;
            c->next = q->spare;
            q->spare = c;
        }
    }
    return n;
}

bool evloop__ingress_is_empty(struct evloop__ingress *q)
{
    /* relaxed: after the loop's heavy barrier, a push whose notify missed the sleep word
     * is visible here (sleep.h); tasks are taken under mu. */
    return atomic_load_explicit(&q->pushed, memory_order_relaxed) == q->taken;
}

size_t evloop__ingress_backlog(struct evloop__ingress *q)
{
    return (size_t)(atomic_load_explicit(&q->pushed, memory_order_relaxed) - q->taken);
}

void evloop__ingress_close(struct evloop__ingress *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = true;
    pthread_mutex_unlock(&q->mu);
}

void evloop__ingress_fenced(struct evloop__ingress *q)
{
    (void)q; /* nothing kept for a barrier: the mutex orders everything */
}

bool evloop__ingress_needs_heavy(struct evloop__ingress *q)
{
    return atomic_load(&q->ever) != 0; /* seq_cst: pairs with first_push() */
}

void evloop__ingress_woke(struct evloop__ingress *q)
{
    (void)q; /* no lanes: the heavy barrier covers every push alike */
}

bool evloop__ingress_wants_fence(struct evloop__ingress *q)
{
    (void)q;
    return false;
}

uint64_t evloop__ingress_lanes(struct evloop__ingress *q)
{
    (void)q;
    return 0;
}

uint64_t evloop__ingress_overflows(struct evloop__ingress *q)
{
    return atomic_load_explicit(&q->overflows, memory_order_relaxed);
}

const char *evloop__ingress_name(void)
{
    return "chunk";
}
