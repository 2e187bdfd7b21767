/* Ingress variant "arena": one single-producer lane per (producer thread, queue), made of
 * fixed segments taken from a pool preallocated with the queue. Implements ingress.h.
 *
 * A producer owns its lane: it writes tasks into its current segment and publishes them
 * with one release store of `tail` (a batch publishes once). No read-modify-write, no
 * fence and no cache line shared with another producer on the fast path: the floor of a
 * hand-off is the line the consumer pulls, not a contended counter. A full segment chains
 * another from the pool (never a block, never a loss); the consumer returns each segment
 * it has read. Per-producer FIFO holds by construction. Prior art: Seastar's per-core-pair
 * queues, moodycamel ConcurrentQueue's implicit producers, urcu-bp's thread registry.
 *
 * Lanes with work are announced: a producer whose lane goes from idle to non-empty
 * (announced 0 -> 1, an exchange, once per idle period) pushes it onto a Treiber stack the
 * consumer empties in one exchange, so the loop never scans idle lanes. The consumer
 * clears `announced` when it finds a lane empty; then the Dekker pair [tail; light
 * barrier; announced] against [announced = 0; barrier; tail] decides who re-announces:
 *   - fence mode: the consumer fences and re-reads tail at once;
 *   - membarrier mode: the lane stays "on probation": re-checked by every drain, and let
 *     go only after the loop's next heavy barrier (ingress_fenced), which the loop issues
 *     before it sleeps, or when many lanes wait (ingress_wants_fence).
 * Whoever turns announced 0 -> 1 (producer exchange, consumer CAS) owns the lane's trip to
 * the work list: it is never there twice.
 *
 * Close: a push marks its lane busy, then reads `closed` after a light barrier, and is
 * busy until its lane is published and announced; close stores closed, issues a heavy
 * barrier, then waits until no lane is busy. So a push racing close is refused, or
 * published and announced before close returns.
 *
 * Lifetime: a lane is referenced by its thread (a thread-local cache, keyed by queue and
 * the queue's unique id, so a freed queue's address reused by a new one is not mistaken
 * for it) and by its queue. At thread exit a destructor marks it orphaned and announces
 * it; the consumer reclaims an orphaned lane once drained (segments back to the pool).
 * The global registry lock orders a thread's exit against a queue's free: neither touches
 * the other's memory after it. Whoever drops the last reference frees the lane.
 *
 *   field            | written by                 | read by
 *   -----------------+----------------------------+---------------------------------
 *   lane.tail, busy  | its producer (release)     | consumer (acquire), close
 *   lane.mode_req    | its producer (release)     | consumer (acquire)
 *   lane.mode_ack    | consumer (release)         | its producer (acquire)
 *   lane.announced   | producer xchg, consumer    | both
 *   lane.orphaned    | thread-exit destructor     | consumer (acquire)
 *   lane.q           | queue free (registry lock) | destructor (registry lock)
 *   q.announce       | producers (CAS push)       | consumer (exchange: take all)
 *   q.lanes, q.pool  | under q.lock               |
 *   work list, head  | consumer only              |                                  */
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "barrier.h"
#include "common.h"
#include "ingress.h"

#define SEG_TASKS 128
#define PROBATION_FENCE 8 /* lanes on probation before the loop is asked for a barrier */

/* HANDED: the consumer lost its CAS of announced to a producer or to lane_orphan(), which
 * will push the lane on the announce stack. The lane stays in the work list, drained like an
 * ACTIVE one but never settled or reclaimed, until take_announced() finds it on the stack and
 * makes it ACTIVE: its tasks stay where the sleep re-check and the final drain see them. */
enum { OFF_LIST, ACTIVE, PROBATION, HANDED }; /* lane.state: where the consumer holds it */

struct seg {
    struct seg *next; /* set before the tail store that covers its first task */
    struct evloop_task tasks[SEG_TASKS];
};

struct lane {
    /* Published by the producer, per push; read by the consumer per drain. */
    alignas(EVLOOP_CACHELINE) _Atomic uint64_t tail;
    _Atomic uint32_t busy;
    _Atomic uint32_t mode_req; /* producer, per switch of mode: odd asks for fenced pushes */
    /* The producer's own: never read by the consumer while the producer lives, so the
     * consumer's reads of tail never take this line away from a push in progress. */
    alignas(EVLOOP_CACHELINE) uint64_t ptail; /* producer: tail as it last stored it */
    uint32_t ppos; /* producer: next free slot in pseg */
    bool fresh;    /* producer: no push yet (the first one fences: needs_heavy) */
    bool fencing;  /* producer: its pushes fence in full (fenced, or leaving it unechoed) */
    uint16_t wakes; /* producer: pushes in a row that woke the loop */
    uint32_t held;  /* producer: fenced pushes in a row into a lane the loop held */
    struct seg *pseg;
    /* Written rarely, by either side. */
    alignas(EVLOOP_CACHELINE) _Atomic uint32_t announced;
    _Atomic uint32_t orphaned;
    _Atomic uint32_t refs;     /* the thread's and the queue's */
    _Atomic uint32_t mode_ack; /* consumer: the last mode_req it acted on */
    struct lane *next_announce;
    struct evloop__ingress *q; /* NULL once the queue is freed; under the registry lock */
    struct lane *next_lane, *prev_lane; /* q.lanes, under q.lock */
    /* The consumer's. */
    alignas(EVLOOP_CACHELINE) uint64_t head;
    uint64_t seen; /* tail as last read: tasks up to it are published, no need to look */
    struct seg *cseg;
    uint32_t cpos, state;
    uint32_t mode_seen;  /* the last mode_req read */
    bool pushes_fenced;  /* mode_seen is odd: settle may let the lane go after a fence */
    struct lane *next_work, *prev_work;
};

struct evloop__ingress {
    /* Read by producers on every push, written once. */
    alignas(EVLOOP_CACHELINE) uint64_t id; /* unique per queue for the life of the process */
    enum evloop__fence fence;
    _Atomic uint32_t closed;
    void (*notify)(void *); /* wakes the loop (ingress.h); may be NULL */
    void *notify_arg;
    alignas(EVLOOP_CACHELINE) _Atomic(struct lane *) announce;
    /* The consumer's. */
    alignas(EVLOOP_CACHELINE) struct lane *work_head, *work_tail;
    uint32_t on_probation;
    /* Registration, the pool, statistics. */
    alignas(EVLOOP_CACHELINE) pthread_mutex_t lock;
    struct lane *lanes;  /* every lane of this queue, under lock */
    struct seg *pool;    /* free segments, under lock */
    struct seg *arena, *arena_end; /* the preallocated segments */
    _Atomic uint64_t nlanes, overflows;
};

/* ---- lanes' lifetime ---- */

static pthread_mutex_t registry = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static _Atomic uint64_t next_queue_id = 1;

/* A fork while another thread holds the registry (exiting, or freeing a queue) would leave
 * the child's copy locked for good, and the child may make loops of its own. */
static void registry_lock(void)
{
    pthread_mutex_lock(&registry);
}

static void registry_unlock(void)
{
    pthread_mutex_unlock(&registry);
}

static void hold_registry_across_fork(void)
{
    pthread_atfork(registry_lock, registry_unlock, registry_unlock);
}

static void lane_put(struct lane *l)
{
    /* acq_rel: the last holder sees everything the other did with the lane. */
    if (atomic_fetch_sub_explicit(&l->refs, 1, memory_order_acq_rel) == 1)
        free(l);
}

static bool seg_in_arena(struct evloop__ingress *q, struct seg *s)
{
    return s >= q->arena && s < q->arena_end;
}

/* Under q->lock. */
static void pool_put_locked(struct evloop__ingress *q, struct seg *s)
{
    s->next = q->pool;
    q->pool = s;
}

static void pool_put(struct evloop__ingress *q, struct seg *s)
{
    pthread_mutex_lock(&q->lock);
    pool_put_locked(q, s);
    pthread_mutex_unlock(&q->lock);
}

/* Takes n segments, chained through next; NULL (nothing taken) when memory runs out. */
__attribute__((noinline)) static struct seg *pool_take(struct evloop__ingress *q, size_t n)
{
    struct seg *got = NULL;
    pthread_mutex_lock(&q->lock);
    for (size_t i = 0; i < n; i++) {
        struct seg *s = q->pool;
        if (s) {
            q->pool = s->next;
        } else if ((s = malloc(sizeof(*s))) != NULL) {
            atomic_fetch_add_explicit(&q->overflows, 1, memory_order_relaxed);
        } else {
            while (got) {
                struct seg *next = got->next;
                pool_put_locked(q, got);
                got = next;
            }
            break;
        }
        s->next = got;
        got = s;
    }
    pthread_mutex_unlock(&q->lock);
    return got;
}

static void announce_push(struct evloop__ingress *q, struct lane *l)
{
    struct lane *top = atomic_load_explicit(&q->announce, memory_order_relaxed);
    do
        l->next_announce = top;
    /* release: pairs with the acquire exchange in take_announced(). */
    while (!atomic_compare_exchange_weak_explicit(&q->announce, &top, l, memory_order_release,
                                                  memory_order_relaxed));
}

static struct lane *lane_new(struct evloop__ingress *q)
{
    struct lane *l = aligned_alloc(EVLOOP_CACHELINE, sizeof(*l));
    struct seg *s = l ? pool_take(q, 1) : NULL;
    if (!s) {
        free(l);
        return NULL;
    }
    *l = (struct lane){.pseg = s, .cseg = s, .q = q, .state = OFF_LIST, .fresh = true};
    s->next = NULL;
    atomic_init(&l->refs, 2);
    pthread_mutex_lock(&q->lock);
    l->next_lane = q->lanes;
    if (q->lanes)
        q->lanes->prev_lane = l;
    q->lanes = l;
    pthread_mutex_unlock(&q->lock);
    atomic_fetch_add_explicit(&q->nlanes, 1, memory_order_relaxed); /* a count for stats */
    return l;
}

/* At thread exit: the lane will never be pushed to again. The exchange hands the lane to
 * the consumer unless it holds it already; if it does not, the loop may have let go of it
 * with this thread's last task still in it (its CAS lost to this exchange) and gone to
 * sleep, so the announce is followed by a wake, as a push's is (tests/model/lanes.pml found
 * the lost wake without it). The registry lock keeps the queue, and so its loop, alive. */
static void lane_orphan(struct lane *l)
{
    pthread_mutex_lock(&registry);
    struct evloop__ingress *q = l->q;
    if (q) {
        /* release: pairs with the acquire in reclaim_if_orphaned(). */
        atomic_store_explicit(&l->orphaned, 1, memory_order_release);
        if (!atomic_exchange(&l->announced, 1)) {
            announce_push(q, l);
            if (q->notify)
                q->notify(q->notify_arg);
        }
    }
    pthread_mutex_unlock(&registry);
    lane_put(l);
}

/* ---- the thread-local cache: which lane this thread has for which queue ---- */

struct cached {
    struct evloop__ingress *q;
    uint64_t id;
    struct lane *lane;
};

struct cache {
    struct cached *v;
    size_t n, cap;
};

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t key;

static _Thread_local struct {
    struct cached last; /* the fast path: the queue pushed to last */
    struct cache *mine;
} tls EVLOOP_TLS_FAST;

static void thread_exit(void *p)
{
    struct cache *c = p;
    for (size_t i = 0; i < c->n; i++)
        lane_orphan(c->v[i].lane);
    free(c->v);
    free(c);
    tls.mine = NULL;
    tls.last = (struct cached){0};
}

static void make_key(void)
{
    pthread_key_create(&key, thread_exit);
}

/* Drops entries whose queue was freed, so a thread that outlives many loops stays small. */
static void prune(struct cache *c)
{
    size_t kept = 0;
    pthread_mutex_lock(&registry);
    for (size_t i = 0; i < c->n; i++) {
        if (c->v[i].lane->q)
            c->v[kept++] = c->v[i];
        else
            lane_put(c->v[i].lane);
    }
    pthread_mutex_unlock(&registry);
    c->n = kept;
}

static struct cache *my_cache(void)
{
    if (tls.mine)
        return tls.mine;
    pthread_once(&key_once, make_key);
    struct cache *c = calloc(1, sizeof(*c));
    if (!c || pthread_setspecific(key, c) != 0) {
        free(c);
        return NULL;
    }
    return tls.mine = c;
}

static struct lane *register_lane(struct evloop__ingress *q)
{
    struct cache *c = my_cache();
    if (!c)
        return NULL;
    prune(c);
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 4;
        struct cached *v = realloc(c->v, cap * sizeof(*v));
        if (!v)
            return NULL;
        c->v = v;
        c->cap = cap;
    }
    struct lane *l = lane_new(q);
    if (!l)
        return NULL;
    c->v[c->n++] = (struct cached){q, q->id, l};
    return l;
}

/* The slow path, kept out of line so the fast path spills no registers. */
__attribute__((noinline)) static struct lane *find_lane(struct evloop__ingress *q)
{
    struct cache *c = tls.mine;
    for (size_t i = 0; c && i < c->n; i++) {
        if (c->v[i].q == q && c->v[i].id == q->id) {
            tls.last = c->v[i];
            return tls.last.lane;
        }
    }
    struct lane *l = register_lane(q);
    if (l)
        tls.last = (struct cached){q, q->id, l};
    return l;
}

static inline struct lane *my_lane(struct evloop__ingress *q)
{
    if (tls.last.q == q && tls.last.id == q->id)
        return tls.last.lane;
    return find_lane(q);
}

/* ---- producers ---- */

int evloop__ingress_new(struct evloop__ingress **out, uint32_t capacity, enum evloop__fence fence,
                        const _Atomic uint32_t *word, void (*notify)(void *), void *notify_arg)
{
    (void)word; /* the caller's notify reads it: every push asks for one */
    pthread_once(&atfork_once, hold_registry_across_fork);
    size_t nseg = capacity / SEG_TASKS < 2 ? 2 : capacity / SEG_TASKS;
    struct evloop__ingress *q = aligned_alloc(EVLOOP_CACHELINE, sizeof(*q));
    struct seg *arena = calloc(nseg, sizeof(*arena));
    if (!q || !arena) {
        free(q);
        free(arena);
        return -ENOMEM;
    }
    *q = (struct evloop__ingress){
        .id = atomic_fetch_add_explicit(&next_queue_id, 1, memory_order_relaxed),
        .fence = fence,
        .notify = notify,
        .notify_arg = notify_arg,
        .arena = arena,
        .arena_end = arena + nseg};
    pthread_mutex_init(&q->lock, NULL);
    for (size_t i = 0; i < nseg; i++)
        pool_put_locked(q, &arena[i]);
    *out = q;
    return 0;
}

/* Segments a batch of n needs beyond the room left in the producer's segment. */
static size_t segs_needed(const struct lane *l, size_t n)
{
    size_t room = SEG_TASKS - l->ppos;
    return n <= room ? 0 : (n - room + SEG_TASKS - 1) / SEG_TASKS;
}

static inline void put_task(struct lane *l, struct seg **spare, evloop_cb cb, void *arg)
{
    if (l->ppos == SEG_TASKS) {
        struct seg *s = *spare;
        *spare = s->next;
        s->next = NULL;
        l->pseg->next = s;
        l->pseg = s;
        l->ppos = 0;
    }
    l->pseg->tasks[l->ppos++] = (struct evloop_task){cb, arg};
}

/* The lane is busy while it publishes; a closed queue refuses (see the file header). */
static inline bool begin_push(struct evloop__ingress *q, struct lane *l)
{
    atomic_store_explicit(&l->busy, 1, memory_order_relaxed);
    evloop__barrier_light(q->fence); /* busy before closed: pairs with close's heavy one */
    if (!atomic_load_explicit(&q->closed, memory_order_relaxed))
        return true;
    atomic_store_explicit(&l->busy, 0, memory_order_release);
    return false;
}

/* ---- fenced pushes ----
 * In membarrier mode a lane the loop found empty stays on probation until the loop's next
 * heavy barrier, which its next sleep pays: a producer that posts now and then, finding the
 * loop asleep each time, costs one membarrier per post. Such a lane switches to fenced
 * pushes: a seq_cst fence between the tail store and the read of `announced`, so the loop
 * may settle it as fence mode does (announced = 0; fence; re-read tail) and let it go at
 * once. A lane whose fenced pushes keep finding the loop holding it streams, and switches
 * back to plain stores.
 *
 * The producer asks by bumping mode_req (odd: fenced); the consumer acts on a new value
 * when it next drains or re-checks the lane, and echoes it in mode_ack. Fencing starts
 * with the request (a fence is never wrong, and the request's release store makes every
 * earlier push visible to the consumer that reads it), but stops only once the producer
 * reads the echo of its plain request: until then the consumer may be letting the lane go
 * on the strength of its fences. A sequence, not a bit: a bit would read as echoed after a
 * switch and back that the consumer never answered (tests/model/lanes.pml, -DBROKEN_ONE_BIT
 * and -DBROKEN_STOP_UNECHOED). */
#define WAKES_TO_FENCE 2   /* pushes in a row that woke the loop */
#define HELD_TO_PLAIN 1024 /* fenced pushes in a row into a held lane: ~ a membarrier's cost */

static inline bool asks_fenced(const struct lane *l)
{
    return atomic_load_explicit(&l->mode_req, memory_order_relaxed) & 1;
}

/* Producer: fenced <-> plain, one step (the parity alternates). release: pairs with the
 * acquire in sync_mode(). */
static void ask_mode_switch(struct lane *l)
{
    uint32_t req = atomic_load_explicit(&l->mode_req, memory_order_relaxed) + 1;
    if (req & 1)
        l->fencing = true;
    l->wakes = 0;
    l->held = 0;
    atomic_store_explicit(&l->mode_req, req, memory_order_release);
}

void evloop__ingress_woke(struct evloop__ingress *q)
{
    /* The lane of the push that just woke the loop: this thread's last (never a new one).
     * In seq_cst mode, where every push fences already, the switch changes nothing, but it
     * runs all the same: the sanitizers' builds, always seq_cst, see its handshake. */
    struct lane *l = tls.last.q == q && tls.last.id == q->id ? tls.last.lane : NULL;
    if (!l)
        return;
    l->held = 0;
    if (!asks_fenced(l) && ++l->wakes >= WAKES_TO_FENCE)
        ask_mode_switch(l);
}

static inline void end_push(struct evloop__ingress *q, struct lane *l, uint64_t n)
{
    /* acquire: pairs with the release in sync_mode(): the settles the consumer made on the
     * strength of this lane's fences happen before its pushes stop fencing. */
    if (l->fencing && !asks_fenced(l) &&
        atomic_load_explicit(&l->mode_ack, memory_order_acquire) ==
            atomic_load_explicit(&l->mode_req, memory_order_relaxed))
        l->fencing = false;
    l->ptail += n;
    /* release: pairs with the acquire loads of tail in drain_lane() and close. */
    atomic_store_explicit(&l->tail, l->ptail, memory_order_release);
    /* tail before announced: pairs with settle() (fence) or the heavy barrier. A lane's
     * first push fences in full, and a push that wins the exchange of announced is ordered by
     * it, before the read of the sleep word that follows: so a loop whose work list is
     * empty may sleep without the heavy barrier (evloop__ingress_needs_heavy). A fenced
     * lane's push fences in full too (above). */
    evloop__barrier_light(l->fresh || l->fencing ? EVLOOP__FENCE_SEQ_CST : q->fence);
    l->fresh = false;
    if (!atomic_load_explicit(&l->announced, memory_order_relaxed) &&
        !atomic_exchange(&l->announced, 1)) {
        announce_push(q, l);
#if !defined(__x86_64__) && !defined(__i386__)
        evloop__fence(); /* an exchange is a full barrier on x86 only */
#endif
    } else { /* the loop holds the lane: a stream, not a post now and then */
        l->wakes = 0;
        if (l->fencing && asks_fenced(l) && ++l->held >= HELD_TO_PLAIN)
            ask_mode_switch(l);
    }
    /* Not busy only once announced: a close that waited for this sees the lane on the
     * stack or held by the consumer, never published and unannounced. release: pairs
     * with the acquire in evloop__ingress_close(). */
    atomic_store_explicit(&l->busy, 0, memory_order_release);
}

__attribute__((noinline)) static int refuse(struct evloop__ingress *q, struct seg *spare)
{
    while (spare) {
        struct seg *next = spare->next;
        pool_put(q, spare);
        spare = next;
    }
    return -ESHUTDOWN;
}

int evloop__ingress_push(struct evloop__ingress *q, evloop_cb cb, void *arg)
{
    struct lane *l = my_lane(q);
    if (!l)
        return -ENOMEM;
    struct seg *spare = NULL;
    if (l->ppos == SEG_TASKS && !(spare = pool_take(q, 1)))
        return -ENOMEM;
    if (!begin_push(q, l))
        return refuse(q, spare);
    put_task(l, &spare, cb, arg);
    end_push(q, l, 1);
    return EVLOOP__PUSHED_NOTIFY;
}

int evloop__ingress_push_batch(struct evloop__ingress *q, const struct evloop_task *tasks,
                               size_t n)
{
    struct lane *l = my_lane(q);
    if (!l)
        return -ENOMEM;
    size_t need = segs_needed(l, n);
    struct seg *spare = need ? pool_take(q, need) : NULL;
    if (need && !spare)
        return -ENOMEM;
    if (!begin_push(q, l))
        return refuse(q, spare);
    for (size_t i = 0; i < n; i++)
        put_task(l, &spare, tasks[i].cb, tasks[i].arg);
    end_push(q, l, n);
    return EVLOOP__PUSHED_NOTIFY;
}

void evloop__ingress_close(struct evloop__ingress *q)
{
    atomic_store_explicit(&q->closed, 1, memory_order_relaxed);
    evloop__barrier_heavy(q->fence); /* closed before busy: pairs with begin_push() */
    pthread_mutex_lock(&q->lock);
    for (struct lane *l = q->lanes; l; l = l->next_lane)
        /* acquire: pairs with the release of busy in end_push(): the tail is visible. */
        while (atomic_load_explicit(&l->busy, memory_order_acquire))
            evloop__cpu_relax();
    pthread_mutex_unlock(&q->lock);
}

/* ---- the consumer ---- */

static void work_append(struct evloop__ingress *q, struct lane *l, uint32_t state)
{
    l->state = state;
    l->next_work = NULL;
    l->prev_work = q->work_tail;
    if (q->work_tail)
        q->work_tail->next_work = l;
    else
        q->work_head = l;
    q->work_tail = l;
}

static void work_remove(struct evloop__ingress *q, struct lane *l)
{
    if (l->state == PROBATION)
        q->on_probation--;
    if (l->prev_work)
        l->prev_work->next_work = l->next_work;
    else
        q->work_head = l->next_work;
    if (l->next_work)
        l->next_work->prev_work = l->prev_work;
    else
        q->work_tail = l->prev_work;
    l->state = OFF_LIST;
}

static void take_announced(struct evloop__ingress *q)
{
    if (!atomic_load_explicit(&q->announce, memory_order_relaxed))
        return;
    /* acquire: pairs with the release CAS in announce_push(). */
    struct lane *l = atomic_exchange_explicit(&q->announce, NULL, memory_order_acquire);
    struct lane *fifo = NULL; /* the stack is newest first */
    while (l) {
        struct lane *next = l->next_announce;
        l->next_announce = fifo;
        fifo = l;
        l = next;
    }
    for (l = fifo; l; l = l->next_announce) {
        if (l->state == PROBATION || l->state == HANDED) { /* already in the work list */
            if (l->state == PROBATION)
                q->on_probation--;
            l->state = ACTIVE;
        } else {
            work_append(q, l, ACTIVE);
        }
    }
}

/* Tasks published and not drained: at least `want` of them, or all. tail is read only when
 * the last look holds fewer than want, so a consumer with work in hand leaves the producer's
 * line alone, and a drain still takes everything visible up to its budget. */
static uint64_t lane_avail(struct lane *l, uint64_t want)
{
    if (l->seen - l->head < want)
        /* acquire: pairs with the release of tail in end_push(). */
        l->seen = atomic_load_explicit(&l->tail, memory_order_acquire);
    return l->seen - l->head;
}

static bool lane_is_empty(struct lane *l)
{
    return lane_avail(l, 1) == 0;
}

/* A lane the consumer holds (announced == 1, so it is in no announce stack) that is
 * orphaned and drained: unlinked, its segment back in the pool, the queue's ref dropped. */
static bool reclaim_if_orphaned(struct evloop__ingress *q, struct lane *l)
{
    /* acquire: pairs with the release in lane_orphan(): every push is visible. */
    if (!atomic_load_explicit(&l->orphaned, memory_order_acquire) || !lane_is_empty(l))
        return false;
    if (l->state != OFF_LIST)
        work_remove(q, l);
    pthread_mutex_lock(&q->lock);
    if (l->prev_lane)
        l->prev_lane->next_lane = l->next_lane;
    else
        q->lanes = l->next_lane;
    if (l->next_lane)
        l->next_lane->prev_lane = l->prev_lane;
    pool_put_locked(q, l->cseg);
    pthread_mutex_unlock(&q->lock);
    atomic_fetch_sub_explicit(&q->nlanes, 1, memory_order_relaxed);
    lane_put(l);
    return true;
}

/* The consumer takes the lane back (announced 0 -> 1) when it finds work or an orphan in
 * it; a failed CAS means the producer took it and is pushing it on the stack. */
static bool reclaim_announce(struct lane *l)
{
    uint32_t zero = 0;
    return atomic_compare_exchange_strong(&l->announced, &zero, 1);
}

/* The consumer acts on a new mode request of the lane's producer (fenced pushes, above)
 * and echoes it. acquire: pairs with the release in ask_mode_switch(): every push made
 * before the request is visible to this thread's next reads of tail. release: the settles
 * made while pushes_fenced was set happen before the producer that reads the echo stops
 * fencing. */
static void sync_mode(struct lane *l)
{
    uint32_t req = atomic_load_explicit(&l->mode_req, memory_order_acquire);
    if (req == l->mode_seen)
        return;
    l->mode_seen = req;
    l->pushes_fenced = req & 1;
    atomic_store_explicit(&l->mode_ack, req, memory_order_release);
}

enum recheck { STILL_PROBATION, NOW_ACTIVE, GONE }; /* GONE: off the list, maybe freed */

/* A lane in the work list with announced just stored 0, whose every push fences before it
 * reads announced (fence mode, or a fenced lane): after a fence, the lane leaves the list
 * if it is still empty; else the consumer takes it back, or hands it to its announcer. */
static enum recheck let_go(struct evloop__ingress *q, struct lane *l)
{
    /* announced before tail: pairs with the producer's fence in end_push(). */
    evloop__fence();
    bool orphaned = atomic_load_explicit(&l->orphaned, memory_order_acquire);
    if (lane_is_empty(l) && !orphaned) {
        work_remove(q, l);
        return GONE;
    }
    if (!reclaim_announce(l)) {
        l->state = HANDED; /* its announcer pushes it; keep draining it until then */
        return NOW_ACTIVE;
    }
    return reclaim_if_orphaned(q, l) ? GONE : NOW_ACTIVE; /* or it stays ACTIVE */
}

/* An ACTIVE lane found empty. */
static void settle(struct evloop__ingress *q, struct lane *l)
{
    if (reclaim_if_orphaned(q, l))
        return;
    /* release: the consumer's last use of next_announce (take_announced) happens before
     * the producer that exchanges announced 0 -> 1 writes it again. */
    atomic_store_explicit(&l->announced, 0, memory_order_release);
    if (q->fence != EVLOOP__FENCE_SEQ_CST && !l->pushes_fenced) {
        l->state = PROBATION; /* let go only after the next heavy barrier */
        q->on_probation++;
        return;
    }
    let_go(q, l);
}

/* A lane on probation, re-checked: work (or an orphan) found makes it ACTIVE again, or
 * hands it to the producer that re-announced it. A lane whose producer has switched to
 * fenced pushes meanwhile is let go as settle() would now. */
static enum recheck recheck(struct evloop__ingress *q, struct lane *l)
{
    sync_mode(l);
    if (l->pushes_fenced) {
        q->on_probation--;
        l->state = ACTIVE;
        return let_go(q, l);
    }
    bool orphaned = atomic_load_explicit(&l->orphaned, memory_order_acquire);
    if (lane_is_empty(l) && !orphaned)
        return STILL_PROBATION;
    if (!reclaim_announce(l)) {
        q->on_probation--;
        l->state = HANDED; /* its announcer pushes it; keep draining it until then */
        return NOW_ACTIVE;
    }
    q->on_probation--;
    l->state = ACTIVE;
    return reclaim_if_orphaned(q, l) ? GONE : NOW_ACTIVE;
}

/* Copies up to max of the lane's published tasks into out. */
static size_t drain_lane(struct evloop__ingress *q, struct lane *l, struct evloop_task *out,
                         size_t max)
{
    uint64_t avail = lane_avail(l, max);
    size_t n = avail < max ? (size_t)avail : max;
    for (size_t i = 0; i < n; i++) {
        if (l->cpos == SEG_TASKS) {
            struct seg *done = l->cseg;
            l->cseg = done->next;
            l->cpos = 0;
            pool_put(q, done);
        }
        out[i] = l->cseg->tasks[l->cpos++];
    }
    l->head += n;
    return n;
}

size_t evloop__ingress_drain(struct evloop__ingress *q, struct evloop_task *out, size_t max)
{
    take_announced(q);
    size_t n = 0;
    struct lane *l = q->work_head, *stop = q->work_tail;
    while (l && n < max) {
        struct lane *next = l->next_work;
        bool last_one = l == stop;
        bool active = l->state == ACTIVE || l->state == HANDED ||
                      (l->state == PROBATION && recheck(q, l) == NOW_ACTIVE);
        if (active) {
            sync_mode(l);
            n += drain_lane(q, l, out + n, max - n);
            if (lane_is_empty(l)) {
                if (l->state == ACTIVE)
                    settle(q, l);
            } else if (l != q->work_tail) { /* round robin: the rest waits behind others */
                uint32_t state = l->state;
                work_remove(q, l);
                work_append(q, l, state);
            }
        }
        if (last_one)
            break;
        l = next;
    }
    return n;
}

bool evloop__ingress_is_empty(struct evloop__ingress *q)
{
    /* A lane just taken from the announce stack counts as work even when its tasks were
     * drained already (its producer was still announcing it): it is ACTIVE, with announced
     * 1, until a drain settles it, and a push into it neither exchanges nor fences, so the
     * loop must tick again rather than sleep on it without the heavy barrier
     * (tests/model/lanes.pml, -DBROKEN_STACK_NOT_WORK). */
    if (atomic_load_explicit(&q->announce, memory_order_relaxed)) {
        take_announced(q);
        return false;
    }
    for (struct lane *l = q->work_head; l; l = l->next_work)
        if (!lane_is_empty(l))
            return false;
    return true;
}

size_t evloop__ingress_backlog(struct evloop__ingress *q)
{
    size_t n = 0;
    for (struct lane *l = q->work_head; l; l = l->next_work)
        n += (size_t)(atomic_load_explicit(&l->tail, memory_order_relaxed) - l->head);
    return n;
}

void evloop__ingress_fenced(struct evloop__ingress *q)
{
    struct lane *l = q->work_head;
    while (l && q->on_probation > 0) {
        struct lane *next = l->next_work;
        /* Still empty after the barrier: every producer now sees announced 0. */
        if (l->state == PROBATION && recheck(q, l) == STILL_PROBATION)
            work_remove(q, l);
        l = next;
    }
}

bool evloop__ingress_needs_heavy(struct evloop__ingress *q)
{
    return q->work_head != NULL; /* the consumer's own list (ingress.h says why) */
}

bool evloop__ingress_wants_fence(struct evloop__ingress *q)
{
    return q->on_probation >= PROBATION_FENCE;
}

void evloop__ingress_free(struct evloop__ingress *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&registry); /* after this, no exiting thread touches q */
    for (struct lane *l = q->lanes; l; l = l->next_lane)
        l->q = NULL;
    pthread_mutex_unlock(&registry);
    struct lane *l = q->lanes;
    while (l) {
        struct lane *next = l->next_lane;
        for (struct seg *s = l->cseg; s;) { /* the lane's chain, up to its producer's */
            struct seg *after = s == l->pseg ? NULL : s->next;
            pool_put_locked(q, s);
            s = after;
        }
        lane_put(l);
        l = next;
    }
    while (q->pool) {
        struct seg *s = q->pool;
        q->pool = s->next;
        if (!seg_in_arena(q, s))
            free(s);
    }
    pthread_mutex_destroy(&q->lock);
    free(q->arena);
    free(q);
}

uint64_t evloop__ingress_overflows(struct evloop__ingress *q)
{
    return atomic_load_explicit(&q->overflows, memory_order_relaxed);
}

uint64_t evloop__ingress_lanes(struct evloop__ingress *q)
{
    return atomic_load_explicit(&q->nlanes, memory_order_relaxed);
}

const char *evloop__ingress_name(void)
{
    return "arena";
}

const char *evloop__ingress_auto_seq_cst(void)
{
    return NULL; /* membarrier: a lane's pushes stay fence-free, and its sleeps skip the heavy
                    barrier once its producer fences (fenced mode, above) */
}
