/* Ingress variant "chunk": a list of fixed-size chunks that producers append to under a
 * mutex, and that the consumer reads without it. Implements ingress.h.
 *
 * Producers: under the mutex, a push writes its task into the tail chunk and publishes it
 * with a release store of the chunk's `count`; a full chunk gets a successor (from the
 * pool) whose first task is written and counted before the full one's `next` points to it.
 * So a linked chunk always holds a published task, and a full chunk is never written again.
 * The mutex orders producers among themselves and against close; nothing else takes it.
 *
 * The consumer never locks: it reads the chunk it is in up to `count` (acquire), follows
 * `next` once that chunk is full and read, and hands the chunk it leaves back through a
 * lock-free stack (`returned`: its one pusher is the consumer, and producers take it whole
 * with an exchange under the mutex, so no ABA) that refills the pool. A submit costs one
 * lock that only other producers contend for; the loop's reads take from a producer only
 * the line of the count it reads, once per catch-up.
 *
 * Wake protocol (ingress.h): a push reads the loop's sleep word inside the mutex, after its
 * count store, and asks its caller for a notify only when it read the loop asleep; the
 * loop, after it stores its sleep value, takes and releases the mutex (_fenced) before its
 * re-check. Whichever critical section comes first, the other side sees it: the re-check
 * sees the push, or the push sees the sleep value (tests/model/chunk.pml). So a push
 * fences nowhere, the loop needs no heavy barrier for this queue, and a flood's pushes read
 * a word the loop writes only when it sleeps. */
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "common.h"
#include "ingress.h"

#define CHUNK_TASKS 128

struct chunk {
    /* Published under the mutex (release); read by the consumer (acquire). */
    _Atomic uint32_t count;
    _Atomic(struct chunk *) next; /* the successor, set once this chunk is full; the link in
                                     the pool and the returned stack */
    alignas(EVLOOP_CACHELINE) struct evloop_task tasks[CHUNK_TASKS];
};

struct evloop__ingress {
    alignas(EVLOOP_CACHELINE) pthread_mutex_t mu;
    struct chunk *tail; /* under mu: the chunk producers write */
    struct chunk *pool; /* under mu: free chunks */
    bool closed;        /* under mu */
    const _Atomic uint32_t *word; /* the loop's sleep word, read under mu; NULL: none */
    /* Pushed by the consumer, taken whole by a producer under mu. */
    alignas(EVLOOP_CACHELINE) _Atomic(struct chunk *) returned;
    _Atomic uint64_t overflows;
    /* The consumer's. */
    alignas(EVLOOP_CACHELINE) struct chunk *cur; /* the chunk it reads */
    uint32_t pos;  /* next task to read in cur */
    uint32_t seen; /* cur's count as last read: tasks before it need no look */
};

static struct chunk *chunk_alloc(void)
{
    return aligned_alloc(EVLOOP_CACHELINE, sizeof(struct chunk));
}

static void free_chain(struct chunk *c)
{
    while (c) {
        struct chunk *next = atomic_load_explicit(&c->next, memory_order_relaxed);
        free(c);
        c = next;
    }
}

void evloop__ingress_free(struct evloop__ingress *q)
{
    if (!q)
        return;
    free_chain(q->cur); /* up to the tail */
    free_chain(q->pool);
    free_chain(atomic_load_explicit(&q->returned, memory_order_relaxed));
    pthread_mutex_destroy(&q->mu);
    free(q);
}

int evloop__ingress_new(struct evloop__ingress **out, uint32_t capacity, enum evloop__fence fence,
                        const _Atomic uint32_t *word, void (*notify)(void *), void *notify_arg)
{
    /* The mutex orders pushes against close and against the loop's sleep; nothing is
     * announced outside a push. */
    (void)fence;
    (void)notify;
    (void)notify_arg;
    struct evloop__ingress *q = aligned_alloc(EVLOOP_CACHELINE, sizeof(*q));
    if (!q)
        return -ENOMEM;
    *q = (struct evloop__ingress){.word = word};
    /* Adaptive: the critical sections are a few stores, so a contended lock is better
     * spun on briefly than slept on (glibc extension; a plain mutex elsewhere). */
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
#endif
    pthread_mutex_init(&q->mu, &attr);
    pthread_mutexattr_destroy(&attr);
    /* The first chunk is both ends; the pool holds `capacity` more tasks' worth, so they
     * need no allocation. */
    uint32_t chunks = 1 + (capacity + CHUNK_TASKS - 1) / CHUNK_TASKS;
    for (uint32_t i = 0; i < chunks; i++) {
        struct chunk *c = chunk_alloc();
        if (!c) {
            evloop__ingress_free(q);
            return -ENOMEM;
        }
        atomic_init(&c->count, 0);
        atomic_init(&c->next, q->pool);
        q->pool = c;
    }
    q->cur = q->tail = q->pool;
    q->pool = atomic_load_explicit(&q->tail->next, memory_order_relaxed);
    atomic_store_explicit(&q->tail->next, NULL, memory_order_relaxed);
    *out = q;
    return 0;
}

/* Under mu: an empty chunk, from the pool, the chunks the consumer returned, or the heap;
 * NULL when out of memory. */
static struct chunk *chunk_get(struct evloop__ingress *q)
{
    if (!q->pool)
        /* acquire: pairs with the release CAS in give_back(): the consumer's reads of the
         * chunk happen before it is written again. */
        q->pool = atomic_exchange_explicit(&q->returned, NULL, memory_order_acquire);
    struct chunk *c = q->pool;
    if (c) {
        q->pool = atomic_load_explicit(&c->next, memory_order_relaxed);
    } else {
        c = chunk_alloc();
        if (!c)
            return NULL;
        atomic_fetch_add_explicit(&q->overflows, 1, memory_order_relaxed);
    }
    atomic_store_explicit(&c->count, 0, memory_order_relaxed);
    atomic_store_explicit(&c->next, NULL, memory_order_relaxed);
    return c;
}

/* Under mu, after a push's count store: what the push asks of its caller. relaxed: the
 * mutex orders this read against the loop's store of its sleep value (the file header);
 * the value 0 is AWAKE (sleep.h). */
static int wake_decision(const struct evloop__ingress *q)
{
    if (q->word && atomic_load_explicit(q->word, memory_order_relaxed) == 0)
        return EVLOOP__PUSHED;
    return EVLOOP__PUSHED_NOTIFY;
}

/* Under mu: writes tasks into c from its count on (they fit) and publishes them. release:
 * pairs with the acquire loads of count in the consumer. */
static void fill(struct chunk *c, const struct evloop_task *tasks, uint32_t n)
{
    uint32_t at = atomic_load_explicit(&c->count, memory_order_relaxed);
    for (uint32_t i = 0; i < n; i++)
        c->tasks[at + i] = tasks[i];
    atomic_store_explicit(&c->count, at + n, memory_order_release);
}

/* Under mu: links a filled successor after the full tail. release: the successor's tasks
 * and count before the consumer that follows next reads them. */
static void link_after_tail(struct evloop__ingress *q, struct chunk *c)
{
    atomic_store_explicit(&q->tail->next, c, memory_order_release);
    q->tail = c;
}

/* Takes mu for a push: true, holding it; false, not holding it, once the queue is closed. */
static bool lock_open(struct evloop__ingress *q)
{
    pthread_mutex_lock(&q->mu);
    if (!q->closed)
        return true;
    pthread_mutex_unlock(&q->mu);
    return false;
}

int evloop__ingress_push(struct evloop__ingress *q, evloop_cb cb, void *arg)
{
    struct evloop_task t = {cb, arg};
    if (!lock_open(q))
        return -ESHUTDOWN;
    struct chunk *c = q->tail;
    if (atomic_load_explicit(&c->count, memory_order_relaxed) < CHUNK_TASKS) {
        fill(c, &t, 1);
    } else {
        c = chunk_get(q);
        if (!c) {
            pthread_mutex_unlock(&q->mu);
            return -ENOMEM;
        }
        fill(c, &t, 1);
        link_after_tail(q, c);
    }
    int r = wake_decision(q);
    pthread_mutex_unlock(&q->mu);
    return r;
}

int evloop__ingress_push_batch(struct evloop__ingress *q, const struct evloop_task *tasks,
                               size_t n)
{
    if (!lock_open(q))
        return -ESHUTDOWN;
    /* All or none: the chunks a batch needs are taken, in a chain nobody else sees, before
     * any task is written. */
    uint32_t room = CHUNK_TASKS - atomic_load_explicit(&q->tail->count, memory_order_relaxed);
    size_t need = n <= room ? 0 : (n - room + CHUNK_TASKS - 1) / CHUNK_TASKS;
    struct chunk *chain = NULL, *last = NULL;
    for (size_t i = 0; i < need; i++) {
        struct chunk *c = chunk_get(q);
        if (!c) {
            while (chain) { /* back to the pool, never seen by the consumer */
                struct chunk *next = atomic_load_explicit(&chain->next, memory_order_relaxed);
                atomic_store_explicit(&chain->next, q->pool, memory_order_relaxed);
                q->pool = chain;
                chain = next;
            }
            pthread_mutex_unlock(&q->mu);
            return -ENOMEM;
        }
        if (last)
            atomic_store_explicit(&last->next, c, memory_order_relaxed);
        else
            chain = c;
        last = c;
    }
    uint32_t first = n < room ? (uint32_t)n : room;
    if (first)
        fill(q->tail, tasks, first);
    for (size_t done = first; done < n;) {
        struct chunk *c = chain;
        chain = atomic_load_explicit(&c->next, memory_order_relaxed);
        atomic_store_explicit(&c->next, NULL, memory_order_relaxed);
        uint32_t k = n - done < CHUNK_TASKS ? (uint32_t)(n - done) : CHUNK_TASKS;
        fill(c, tasks + done, k);
        link_after_tail(q, c);
        done += k;
    }
    int r = wake_decision(q);
    pthread_mutex_unlock(&q->mu);
    return r;
}

/* Consumer: a chunk it has read to the end and left goes back for producers to reuse.
 * release: its reads of the chunk happen before the producer that takes it writes it. */
static void give_back(struct evloop__ingress *q, struct chunk *c)
{
    struct chunk *top = atomic_load_explicit(&q->returned, memory_order_relaxed);
    do
        atomic_store_explicit(&c->next, top, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&q->returned, &top, c, memory_order_release,
                                                  memory_order_relaxed));
}

/* Consumer: tasks published in cur and not read yet, at least; count is read only once
 * the last look has been read. acquire: pairs with the release in fill(). */
static uint32_t avail(struct evloop__ingress *q)
{
    if (q->seen == q->pos)
        q->seen = atomic_load_explicit(&q->cur->count, memory_order_acquire);
    return q->seen - q->pos;
}

/* Consumer: cur is read to its end; moves to its successor if there is one. acquire:
 * pairs with the release in link_after_tail(). */
static bool next_chunk(struct evloop__ingress *q)
{
    if (q->pos < CHUNK_TASKS)
        return false; /* producers still write cur */
    struct chunk *next = atomic_load_explicit(&q->cur->next, memory_order_acquire);
    if (!next)
        return false;
    struct chunk *done = q->cur;
    q->cur = next;
    q->pos = q->seen = 0;
    give_back(q, done);
    return true;
}

size_t evloop__ingress_drain(struct evloop__ingress *q, struct evloop_task *out, size_t max)
{
    size_t n = 0;
    while (n < max) {
        uint32_t k = avail(q);
        if (k == 0) {
            if (!next_chunk(q))
                break;
            continue;
        }
        if (k > max - n)
            k = (uint32_t)(max - n);
        for (uint32_t i = 0; i < k; i++)
            out[n + i] = q->cur->tasks[q->pos + i];
        q->pos += k;
        n += k;
    }
    return n;
}

bool evloop__ingress_is_empty(struct evloop__ingress *q)
{
    /* After the loop's heavy barrier, a push whose notify missed the sleep word is
     * visible here (sleep.h). A linked successor always holds a published task. */
    if (avail(q) > 0)
        return false;
    return q->pos < CHUNK_TASKS || !atomic_load_explicit(&q->cur->next, memory_order_acquire);
}

size_t evloop__ingress_backlog(struct evloop__ingress *q)
{
    /* A hint: what cur holds unread, and the successor's count if there is one. */
    size_t n = atomic_load_explicit(&q->cur->count, memory_order_relaxed) - q->pos;
    struct chunk *next = atomic_load_explicit(&q->cur->next, memory_order_relaxed);
    if (next)
        n += atomic_load_explicit(&next->count, memory_order_relaxed);
    return n;
}

void evloop__ingress_close(struct evloop__ingress *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = true;
    pthread_mutex_unlock(&q->mu);
}

void evloop__ingress_fenced(struct evloop__ingress *q)
{
    /* After the loop stored its sleep value: a push whose critical section comes after this
     * one reads that value; one before it is seen by the re-check (the file header). */
    pthread_mutex_lock(&q->mu);
    pthread_mutex_unlock(&q->mu);
}

bool evloop__ingress_needs_heavy(struct evloop__ingress *q)
{
    (void)q; /* the mutex orders every push's wake decision (the file header) */
    return false;
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

const char *evloop__ingress_auto_seq_cst(void)
{
    /* The loop never needs the heavy barrier for these queues (needs_heavy), and a push
     * takes a barrier only on its way to wake a sleeping loop: membarrier would buy
     * nothing but its registration. */
    return "chunk variant: pushes order their wake by the queue's mutex, no heavy barrier";
}
