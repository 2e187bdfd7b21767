/* Ingress variant "arena": a bounded lock-free MPSC ring over an arena preallocated at
 * loop creation, spilling into an ordered overflow list when full. Implements ingress.h.
 *
 * Ring: a bounded array of slots. A producer claims position p with a CAS on tail when
 * the ring has room (p - head_pub < capacity), writes the task and publishes seq = p + 1;
 * the consumer takes slot[head] when its seq == head + 1 and, once per drain, publishes
 * how far it got in head_pub. The consumer never writes a slot: a slot's cache line
 * moves once per lap each way, and producers read head_pub, not the slots, to find
 * room (the per-slot sequence idea is Dmitry Vyukov's bounded queue, here with one
 * consumer that frees slots in bulk).
 * Bit 63 of tail is the "closed" flag, so closing and claiming are one atomic word and a
 * push racing _close() is either accepted or refused, never both.
 *
 * Full ring: a producer waits while the loop keeps making room, until a quarter of the
 * ring is free (so it refills lines the consumer left long ago instead of chasing it
 * slot by slot); it spills when the loop makes no progress for a while.
 *
 * Overflow: when the ring stays full a producer appends to a mutex-protected list of
 * chunks and sets `spill`. While a producer sees spill set it appends there too, so its
 * later tasks never overtake its spilled ones through the ring. The consumer takes the
 * whole list and clears spill under the lock, reading tail first: every ring position
 * below that boundary runs before the taken tasks, every later one after them. A spill
 * thus lasts one take, not until the loop has caught up with a flood.
 * Chunks are recycled through a pool: no allocation in steady state. */
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "common.h"
#include "ingress.h"

#define CLOSED_BIT (UINT64_C(1) << 63)
#define OVERFLOW_CHUNK_TASKS 128
/* A producer on a full ring waits at most ROOM_WAIT_NS, and spills as soon as the loop
 * frees nothing for ROOM_STALL_NS (asleep, or busy in a long callback): the overflow,
 * not a blocked producer, absorbs a loop that is waking up. */
#define ROOM_WAIT_NS 200000
#define ROOM_STALL_NS 5000

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
    alignas(EVLOOP_CACHELINE) struct slot *slots; /* set at creation, read-only after */
    uint64_t mask;
    alignas(EVLOOP_CACHELINE) _Atomic uint64_t tail;     /* producers; bit 63 = closed */
    alignas(EVLOOP_CACHELINE) _Atomic uint32_t spill;    /* 1 while the overflow is in use */
    alignas(EVLOOP_CACHELINE) _Atomic uint64_t head_pub; /* consumed so far, once per drain */
    alignas(EVLOOP_CACHELINE) uint64_t head;             /* consumer only from here on */
    struct ov_chunk *taken; /* overflow chunks taken by the consumer, oldest first */
    uint32_t taken_pos;
    uint64_t boundary; /* ring positions below it run before the taken chunks */
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
    /* seq 0 marks every slot empty: the first lap waits for i + 1. */
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
    /* Written under the lock only; relaxed: evloop_stats reads it from anywhere. */
    atomic_store_explicit(&q->overflows,
                          atomic_load_explicit(&q->overflows, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    /* seq_cst: pairs with the load of spill in evloop__ingress_is_empty() (Dekker with
     * the loop's sleep word), and makes this producer's next pushes come here too. Seen
     * set under the lock, no take has happened since the push that set it: the loop
     * takes this task with that one, and that push's exchange already did the Dekker
     * part. */
    if (!atomic_load_explicit(&q->spill, memory_order_relaxed))
        atomic_exchange(&q->spill, 1);
    pthread_mutex_unlock(&q->ov_lock);
    return 0;
}

static uint64_t room_left(struct evloop__ingress *q, uint64_t pos)
{
    /* acquire: pairs with the release of head_pub in drain_ring(): the consumer has read
     * every slot before head_pub, so they may be overwritten. */
    uint64_t head = atomic_load_explicit(&q->head_pub, memory_order_acquire);
    return q->mask + 1 - (pos - head);
}

/* The ring is full at pos. Waits while the loop keeps consuming, until a quarter of the
 * ring is free. False when the loop made no progress for ROOM_STALL_NS, or ROOM_WAIT_NS
 * passed: then the task spills, so a busy or stuck loop never blocks a producer long. */
static bool wait_for_room(struct evloop__ingress *q, uint64_t pos)
{
    uint64_t want = (q->mask + 1) / 4 ? (q->mask + 1) / 4 : 1, seen = room_left(q, pos);
    uint64_t start = evloop__clock_ns(), last = start;
    for (unsigned i = 1;; i++) {
        uint64_t room = room_left(q, pos);
        if (room >= want)
            return true;
        evloop__cpu_relax();
        if ((i & 15) == 0) {
            uint64_t now = evloop__clock_ns();
            if (room != seen)
                last = now;
            seen = room;
            if (now - start > ROOM_WAIT_NS || now - last > ROOM_STALL_NS)
                return false;
        }
    }
}

int evloop__ingress_push(struct evloop__ingress *q, evloop_cb cb, void *arg)
{
    uint64_t pos = atomic_load_explicit(&q->tail, memory_order_relaxed);
    for (;;) {
        if (pos & CLOSED_BIT) {
            /* acquire: pairs with the seq_cst fetch_or in _close(), so what the closer
             * did before closing is visible to this producer after the refusal. */
            atomic_thread_fence(memory_order_acquire);
            return -ESHUTDOWN;
        }
        /* acquire: pairs with the seq_cst clear in take_overflow(), which reads tail
         * first, so a producer back on the ring after a spill claims past that take's
         * boundary. A producer sees its own spill (coherence); others may go to the ring
         * until they see it, which keeps their order too. */
        if (atomic_load_explicit(&q->spill, memory_order_acquire))
            return overflow_push(q, cb, arg);
        if (room_left(q, pos) > 0) {
            /* seq_cst: the claim is the push's Dekker write; pairs with the seq_cst load
             * of tail in evloop__ingress_is_empty(). */
            if (atomic_compare_exchange_weak_explicit(&q->tail, &pos, pos + 1, memory_order_seq_cst,
                                                      memory_order_relaxed)) {
                struct slot *s = &q->slots[pos & q->mask];
                s->cb = cb;
                s->arg = arg;
                /* release: pairs with the acquire of seq in drain_ring(). */
                atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
                return 0;
            }
        } else {
            if (!wait_for_room(q, pos))
                return overflow_push(q, cb, arg);
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
        head++;
    }
    if (n > 0) {
        q->head = head;
        /* release: the slots before head have been read; producers may reuse them. */
        atomic_store_explicit(&q->head_pub, head, memory_order_release);
    }
    return n;
}

static bool ring_has_claims(struct evloop__ingress *q)
{
    /* seq_cst: pairs with the claiming CAS in evloop__ingress_push(). */
    return (atomic_load(&q->tail) & ~CLOSED_BIT) != q->head;
}

/* Takes the whole overflow list and clears spill, recycling spare chunks. Every ring
 * position claimed before the take (below `boundary`) runs before the taken tasks; a
 * producer that spilled goes back to the ring only once it sees spill cleared, so its
 * later ring tasks lie at or past the boundary (tail is read before spill is cleared,
 * both seq_cst). */
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
    q->boundary = atomic_load(&q->tail) & ~CLOSED_BIT;
    q->taken = q->ov_head;
    q->taken_pos = 0;
    q->ov_head = q->ov_tail = NULL;
    atomic_store(&q->spill, 0);
    pthread_mutex_unlock(&q->ov_lock);
}

static void retire_taken_chunk(struct evloop__ingress *q)
{
    struct ov_chunk *c = q->taken;
    q->taken = c->next;
    q->taken_pos = 0;
    c->next = q->spare;
    q->spare = c;
}

/* Hands out taken overflow tasks once the ring has run up to the boundary. */
static size_t drain_taken(struct evloop__ingress *q, struct evloop__task *out, size_t max)
{
    size_t n = 0;
    if (q->head != q->boundary) {
        uint64_t before = q->boundary - q->head;
        n = drain_ring(q, out, max < before ? max : (size_t)before);
        if (q->head != q->boundary)
            return n; /* a claimed position below the boundary is not published yet */
    }
    while (n < max && q->taken) {
        struct ov_chunk *c = q->taken;
        while (n < max && q->taken_pos < c->count)
            out[n++] = c->tasks[q->taken_pos++];
        if (q->taken_pos == c->count)
            retire_taken_chunk(q);
    }
    return n;
}

size_t evloop__ingress_drain(struct evloop__ingress *q, struct evloop__task *out, size_t max)
{
    size_t n = 0;
    for (;;) {
        if (q->taken) {
            n += drain_taken(q, out + n, max - n);
            if (q->taken)
                return n;
        }
        n += drain_ring(q, out + n, max - n);
        /* acquire: pairs with the spill exchange in overflow_push() (under the lock). */
        if (n == max || !atomic_load_explicit(&q->spill, memory_order_acquire))
            return n;
        take_overflow(q);
    }
}

bool evloop__ingress_is_empty(struct evloop__ingress *q)
{
    /* seq_cst loads: pair with the claiming CAS and the spill exchange of a push. */
    return !ring_has_claims(q) && !q->taken && !atomic_load(&q->spill);
}

size_t evloop__ingress_backlog(struct evloop__ingress *q)
{
    uint64_t tail = atomic_load_explicit(&q->tail, memory_order_relaxed) & ~CLOSED_BIT;
    return (size_t)(tail - q->head);
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
