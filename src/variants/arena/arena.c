/* Ingress variant "arena": a bounded lock-free MPSC ring over an arena preallocated at
 * loop creation, spilling into an ordered overflow list when full. Implements ingress.h.
 *
 * Ring: Dmitry Vyukov's bounded MPMC queue, used with one consumer
 * (https://www.1024cores.net/home/lock-free-algorithms/queues/bounded-mpmc-queue):
 * each slot carries a sequence number; a producer claims position p with a CAS on tail
 * when slot[p].seq == p, writes the task and publishes seq = p + 1; the consumer takes
 * slot[head] when seq == head + 1 and frees it with seq = head + capacity.
 * Bit 63 of tail is the "closed" flag, so closing and claiming are one atomic word and a
 * push racing _close() is either accepted or refused, never both.
 *
 * Overflow: when the ring is full a producer appends to a mutex-protected list of chunks
 * and sets `spill`. While spill is set every producer appends there, so a producer's
 * later tasks never overtake its spilled ones through the ring. The consumer takes the
 * whole list, and hands its tasks out only when the ring holds no claimed position
 * (tail == head): every ring task claimed before a spilled task of the same producer has
 * then run. spill is cleared, under the lock, once the taken list and the overflow are
 * both empty. Chunks are recycled through a pool: no allocation in steady state. */
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "common.h"
#include "ingress.h"

#define CLOSED_BIT (UINT64_C(1) << 63)
#define OVERFLOW_CHUNK_TASKS 128
#define FULL_WAIT_SPINS 256 /* pause rounds a producer waits on a full ring before spilling */

struct slot {
    _Atomic uint64_t seq;
    evloop_cb cb;
    void *arg;
};

struct ov_chunk {
    struct ov_chunk *next;
    uint32_t count;
    struct evloop__task tasks[OVERFLOW_CHUNK_TASKS];
};

struct evloop__ingress {
    alignas(EVLOOP_CACHELINE) _Atomic uint64_t tail;  /* producers; bit 63 = closed */
    alignas(EVLOOP_CACHELINE) _Atomic uint32_t spill; /* 1 while the overflow is in use */
    alignas(EVLOOP_CACHELINE) uint64_t head;          /* consumer only from here on */
    uint64_t mask;
    struct slot *slots;
    struct ov_chunk *taken; /* overflow chunks taken by the consumer, oldest first */
    uint32_t taken_pos;
    struct ov_chunk *spare; /* emptied chunks, returned to the pool at the next take */
    alignas(EVLOOP_CACHELINE) pthread_mutex_t ov_lock;
    struct ov_chunk *ov_head, *ov_tail, *pool; /* under ov_lock */
    bool ov_closed;                            /* under ov_lock */
    _Atomic uint64_t overflows;
};

int evloop__ingress_new(struct evloop__ingress **out, uint32_t capacity)
{
    uint64_t cap = 2;
    while (cap < capacity)
        cap <<= 1;
    struct evloop__ingress *q = aligned_alloc(EVLOOP_CACHELINE, sizeof(*q));
    if (!q)
        return -ENOMEM;
    *q = (struct evloop__ingress){.mask = cap - 1};
    q->slots = calloc(cap, sizeof(*q->slots));
    if (!q->slots) {
        free(q);
        return -ENOMEM;
    }
    for (uint64_t i = 0; i < cap; i++)
        atomic_init(&q->slots[i].seq, i);
    pthread_mutex_init(&q->ov_lock, NULL);
    *out = q;
    return 0;
}

static void free_chunks(struct ov_chunk *c)
{
    while (c) {
        struct ov_chunk *next = c->next;
        free(c);
        c = next;
    }
}

void evloop__ingress_free(struct evloop__ingress *q)
{
    if (!q)
        return;
    free_chunks(q->taken);
    free_chunks(q->spare);
    free_chunks(q->ov_head);
    free_chunks(q->pool);
    pthread_mutex_destroy(&q->ov_lock);
    free(q->slots);
    free(q);
}

static int overflow_push(struct evloop__ingress *q, evloop_cb cb, void *arg)
{
    pthread_mutex_lock(&q->ov_lock);
    if (q->ov_closed) {
        pthread_mutex_unlock(&q->ov_lock);
        return -ESHUTDOWN;
    }
    struct ov_chunk *c = q->ov_tail;
    if (!c || c->count == OVERFLOW_CHUNK_TASKS) {
        c = q->pool;
        if (c)
            q->pool = c->next;
        else if (!(c = malloc(sizeof(*c)))) {
            pthread_mutex_unlock(&q->ov_lock);
            return -ENOMEM;
        }
        c->next = NULL;
        c->count = 0;
        if (q->ov_tail)
            q->ov_tail->next = c;
        else
            q->ov_head = c;
        q->ov_tail = c;
    }
    c->tasks[c->count++] = (struct evloop__task){cb, arg};
    atomic_fetch_add_explicit(&q->overflows, 1, memory_order_relaxed);
    /* seq_cst: pairs with the load of spill in evloop__ingress_is_empty() (Dekker with
     * the loop's sleep word), and makes this producer's next pushes come here too. */
    atomic_exchange(&q->spill, 1);
    pthread_mutex_unlock(&q->ov_lock);
    return 0;
}

int evloop__ingress_push(struct evloop__ingress *q, evloop_cb cb, void *arg)
{
    uint64_t pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
    unsigned full_waits = 0;
    for (;;) {
        if (pos & CLOSED_BIT) {
            /* acquire: pairs with the seq_cst fetch_or in _close(), so what the closer
             * did before closing is visible to this producer after the refusal. */
            atomic_thread_fence(memory_order_acquire);
            return -ESHUTDOWN;
        }
        /* relaxed: a producer sees its own spill (coherence); others may go to the ring
         * until they see it, which keeps their order too. */
        if (atomic_load_explicit(&q->spill, memory_order_relaxed))
            return overflow_push(q, cb, arg);
        struct slot *s = &q->slots[pos & q->mask];
        /* acquire: pairs with the consumer's release of the slot in drain_ring(). */
        uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
        int64_t diff = (int64_t)(seq - pos);
        if (diff == 0) {
            /* seq_cst: the claim is the push's Dekker write; pairs with the seq_cst load
             * of tail in evloop__ingress_is_empty(). */
            if (atomic_compare_exchange_weak_explicit(&q->tail, &pos, pos + 1, memory_order_seq_cst,
                                                      memory_order_relaxed)) {
                s->cb = cb;
                s->arg = arg;
                /* release: pairs with the acquire of seq in drain_ring(). */
                atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
                return 0;
            }
        } else if (diff < 0) {
            /* Full: the consumer frees slots in order, so wait a moment for this one
             * before spilling; a running loop keeps the ring (and no lock) in use. */
            if (++full_waits > FULL_WAIT_SPINS)
                return overflow_push(q, cb, arg);
            evloop__cpu_relax();
            pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
        } else {
            pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
        }
    }
}

static size_t drain_ring(struct evloop__ingress *q, struct evloop__task *out, size_t max)
{
    size_t n = 0;
    uint64_t head = q->head;
    while (n < max) {
        struct slot *s = &q->slots[head & q->mask];
        /* acquire: pairs with the producer's release of seq in evloop__ingress_push(). */
        if (atomic_load_explicit(&s->seq, memory_order_acquire) != head + 1)
            break;
        out[n++] = (struct evloop__task){s->cb, s->arg};
        /* release: the slot's fields are read before a producer may reuse it. */
        atomic_store_explicit(&s->seq, head + q->mask + 1, memory_order_release);
        head++;
    }
    q->head = head;
    return n;
}

static bool ring_has_claims(struct evloop__ingress *q)
{
    /* seq_cst: pairs with the claiming CAS in evloop__ingress_push(). */
    return (atomic_load(&q->tail) & ~CLOSED_BIT) != q->head;
}

/* Takes the whole overflow list (if spill says there is one), recycling spare chunks. */
static void take_overflow(struct evloop__ingress *q)
{
    pthread_mutex_lock(&q->ov_lock);
    if (q->spare) {
        struct ov_chunk *last = q->spare;
        while (last->next)
            last = last->next;
        last->next = q->pool;
        q->pool = q->spare;
        q->spare = NULL;
    }
    q->taken = q->ov_head;
    q->taken_pos = 0;
    q->ov_head = q->ov_tail = NULL;
    if (!q->taken)
        atomic_store_explicit(&q->spill, 0, memory_order_relaxed);
    pthread_mutex_unlock(&q->ov_lock);
}

static void retire_taken_chunk(struct evloop__ingress *q)
{
    struct ov_chunk *c = q->taken;
    q->taken = c->next;
    q->taken_pos = 0;
    c->next = q->spare;
    q->spare = c;
    if (!q->taken)
        take_overflow(q); /* clears spill when nothing more was spilled */
}

size_t evloop__ingress_drain(struct evloop__ingress *q, struct evloop__task *out, size_t max)
{
    size_t n = drain_ring(q, out, max);
    while (n < max) {
        if (!q->taken) {
            if (!atomic_load_explicit(&q->spill, memory_order_acquire))
                break;
            take_overflow(q);
            if (!q->taken)
                break;
        }
        /* Spilled tasks wait until every claimed ring position has run (see top). */
        if (ring_has_claims(q)) {
            n += drain_ring(q, out + n, max - n);
            if (ring_has_claims(q))
                break;
            continue;
        }
        struct ov_chunk *c = q->taken;
        while (n < max && q->taken_pos < c->count)
            out[n++] = c->tasks[q->taken_pos++];
        if (q->taken_pos == c->count)
            retire_taken_chunk(q);
    }
    return n;
}

bool evloop__ingress_is_empty(struct evloop__ingress *q)
{
    /* seq_cst loads: pair with the claiming CAS and the spill exchange of a push. */
    return !ring_has_claims(q) && !q->taken && !atomic_load(&q->spill);
}

void evloop__ingress_close(struct evloop__ingress *q)
{
    /* seq_cst: a claim either precedes this (accepted) or sees the bit (refused). */
    atomic_fetch_or(&q->tail, CLOSED_BIT);
    pthread_mutex_lock(&q->ov_lock);
    q->ov_closed = true;
    pthread_mutex_unlock(&q->ov_lock);
}

uint64_t evloop__ingress_overflows(struct evloop__ingress *q)
{
    return atomic_load_explicit(&q->overflows, memory_order_relaxed);
}

const char *evloop__ingress_name(void)
{
    return "arena";
}
