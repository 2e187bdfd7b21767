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
 * as for the arena variant (sleep.h). A batch takes the lock once.
 *
 * Cache lines a push writes: the mutex's, which holds everything a push updates (the tail
 * chunk, its fill, pushed, closed), and the slot of its task. The fill lives there rather
 * than in the chunk, and pushed beside the mutex rather than on a line of its own: a
 * producer owns the mutex's line while it holds the lock, so those stores cost nothing
 * more, where a separate line would be one more transfer inside the critical section,
 * which every other producer waits out. The tail chunk's count is written when the
 * producers leave it (full, or taken by the consumer). */
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
    struct evloop__task tasks[CHUNK_TASKS];
};

struct evloop__ingress {
    /* The producers' line (40 + 24 bytes with glibc on x86-64 and aarch64). */
    alignas(EVLOOP_CACHELINE) pthread_mutex_t mu;
    _Atomic uint64_t pushed; /* written under mu; the consumer polls it */
    struct chunk *tail;      /* under mu */
    uint32_t fill;           /* under mu: tasks in tail (its count is written when left) */
    bool closed;             /* under mu */
    _Atomic bool ever;       /* set by the first push (evloop__ingress_needs_heavy) */
    /* Under mu, once per chunk or take. */
    alignas(EVLOOP_CACHELINE) struct chunk *head;
    struct chunk *pool;
    alignas(EVLOOP_CACHELINE) uint64_t taken; /* consumer only from here on */
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

/* Under mu: appends an empty chunk, from the pool or the heap, and makes it the tail
 * (the one left behind is full: its count is CHUNK_TASKS); NULL when out of memory. */
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
    if (q->tail) {
        q->tail->count = CHUNK_TASKS;
        q->tail->next = c;
    } else {
        q->head = c;
    }
    q->tail = c;
    q->fill = 0;
    return c;
}

/* Under mu: a chunk with room at the tail. */
static struct chunk *tail_with_room(struct evloop__ingress *q)
{
    return q->tail && q->fill < CHUNK_TASKS ? q->tail : append_chunk(q);
}

/* Under mu, after a push: the queue's first push ever marks it and fences in full, so the
 * loop may skip its heavy barrier until then (evloop__ingress_needs_heavy). */
static void first_push(struct evloop__ingress *q)
{
    if (atomic_load_explicit(&q->ever, memory_order_relaxed))
        return;
    atomic_store(&q->ever, true); /* seq_cst: pairs with the load in needs_heavy */
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
    /* All or none: the chunks a batch needs are counted, then taken from the pool (or the
     * heap) before any task is written, and linked as the batch fills them. */
    size_t room = q->tail ? CHUNK_TASKS - q->fill : 0;
    size_t need = n <= room ? 0 : (n - room + CHUNK_TASKS - 1) / CHUNK_TASKS;
    struct chunk *got = NULL;
    for (size_t i = 0; i < need; i++) {
        struct chunk *c = q->pool;
        if (c) {
            q->pool = c->next;
        } else if ((c = malloc(sizeof(*c))) != NULL) {
            atomic_fetch_add_explicit(&q->overflows, 1, memory_order_relaxed);
        } else {
            while (got) {
                struct chunk *next = got->next;
                got->next = q->pool;
                q->pool = got;
                got = next;
            }
            pthread_mutex_unlock(&q->mu);
            return -ENOMEM;
        }
        c->next = got;
        got = c;
    }
    for (size_t i = 0; i < n; i++) {
        if (!q->tail || q->fill == CHUNK_TASKS) {
            struct chunk *c = got;
            got = c->next;
            c->next = q->pool; /* append_chunk() takes it back from the pool at once */
            q->pool = c;
            append_chunk(q);
        }
        q->tail->tasks[q->fill++] = (struct evloop__task){tasks[i].cb, tasks[i].arg};
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
    c->tasks[q->fill++] = (struct evloop__task){cb, arg};
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
    if (q->tail)
        q->tail->count = q->fill; /* the producers leave it: the consumer reads count */
    q->cur = q->head;
    q->cur_pos = 0;
    q->head = q->tail = NULL;
    pthread_mutex_unlock(&q->mu);
}

size_t evloop__ingress_drain(struct evloop__ingress *q, struct evloop__task *out, size_t max)
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
