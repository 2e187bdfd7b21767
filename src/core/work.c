/* The work pool (evloop_work_*), a subsystem: the loop thread hands items to pool threads,
 * which run them and hand each back through an ingress queue of the pool's own, which the
 * tick drains (docs/design.md, "Work pool"; the protocol is tests/model/work.pml).
 *
 *   part           | who                           | how
 *   ---------------+-------------------------------+-------------------------------------
 *   queue (ring)   | loop: push (the only one)     | a bounded ring with a sequence word
 *                  | pool threads: pop (any)       | per slot (Vyukov's bounded MPMC
 *                  |                               | queue, one producer): push = write +
 *                  |                               | release store, pop = CAS on head
 *   overflow       | loop only                     | items waiting for room in the ring
 *   item.state     | loop: cancel (CAS)            | QUEUED -> RUNNING (a pool thread's
 *                  | pool thread: claim (CAS)      | CAS) or -> CANCELLED (the loop's): one
 *                  |                               | wins; then FINISHED when work returned
 *   replies        | pool threads: push            | an ingress queue (arena: one lane per
 *                  | loop: drain (tick)            | pool thread), notify as any producer
 *   sleep words    | pool thread: its own          | AWAKE / ASLEEP; idle bits say who may
 *                  | loop: wake                    | sleep; only the thread whose exchange
 *                  |                               | flips ASLEEP makes the wake call
 *   items, ids     | loop only                     | 256-item blocks; id = gen << 32 | index
 *
 * Every entry a pool thread pops gets one reply (ran, or skipped: cancelled before it was
 * taken), so the loop always learns when a ring slot has been freed and an item may be
 * reused. Reference: D. Vyukov, "Bounded MPMC queue", 1024cores.net. */
#include <pthread.h>
#include <signal.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "callback.h"
#include "spin.h"
#include "wake.h"
#include "work.h"

#define RING_SIZE 4096u      /* items in the queue; more wait on the loop thread */
#define BLOCK_ITEMS 256u     /* items allocated at a time (never freed before the pool) */
#define REPLY_CAPACITY 4096u /* replies the completion queue holds without allocating */
#define REPLY_BUDGET 1024u   /* replies handled per tick, so done callbacks cannot starve it */
#define THREADS_DEFAULT_MAX 64
#define IDLE_WORDS (EVLOOP_WORK_THREADS_MAX / 64)
#define SPIN_START_NS 20000
#define SPIN_CAP_NS 100000 /* the adaptive window never grows past it, as the loop's */
#define PUSH_RETRY_NS 1000000        /* a reply that found no memory is tried again after */
#define DOZE_MAX_NS 200000  /* the longest a reply waits for a dozing loop */
#define DOZE_MIN_NS 20000   /* a shorter doze would save less than the sleep costs */

enum { QUEUED = 0, RUNNING = 1, FINISHED = 2, CANCELLED = 3 };
enum { AWAKE = 0, ASLEEP = 1 };

struct item {
    _Atomic uint32_t state; /* QUEUED, RUNNING, FINISHED, CANCELLED */
    evloop_cb work;
    evloop_work_done_cb done;
    void *arg;
    struct evloop__work_pool *pool;
    /* The loop thread's. */
    struct item *next; /* on the free list or the cancelled list */
    uint32_t gen, index;
    uint8_t refs; /* held by the delivery (until done ran) and by the place in the queue
                     (until the reply of the pool thread that popped it, or the refill that
                     dropped it from the overflow) */
    bool live;    /* accepted, its done has not run */
};

struct slot {
    _Atomic uint64_t seq; /* pos: free for the push at pos; pos + 1: holds that push's item */
    struct item *item;
};

struct worker {
    /* The sleep word: the pool thread stores ASLEEP, the loop (or the pool's end) exchanges
     * it back to AWAKE and then wakes it. Its own line: the loop reads it on a wake. */
    alignas(EVLOOP_CACHELINE) _Atomic uint32_t word;
    struct evloop__work_pool *pool;
    struct evloop__waker *waker;
    pthread_t thread;
    unsigned id;
    /* The pool thread's own. */
    struct evloop__spin spin; /* spin.h */
    _Atomic uint64_t sleeps, spin_hits; /* evloop_work_stats */
};

struct evloop__work_pool {
    evloop *loop;
    /* Set before the threads start, read-only after. */
    struct slot *ring;
    uint64_t mask;
    struct evloop__ingress *replies;
    struct worker *workers;
    unsigned nthreads, nwords, max_spinners;
    long shared_cpus; /* the CPUs the pool threads and the loop have between them */
    bool multi_cpu, spin_adaptive;
    int64_t spin_fixed;
    int *cpus;
    unsigned ncpus;
    bool started;
    _Atomic unsigned threads_started; /* evloop_work_stats */

    /* Pool threads: the consumers' position, the idle bits, how many spin now, the end. */
    alignas(EVLOOP_CACHELINE) _Atomic uint64_t head;
    alignas(EVLOOP_CACHELINE) _Atomic uint64_t idle[IDLE_WORDS];
    _Atomic unsigned spinning;
    _Atomic unsigned awake; /* pool threads not asleep: running an item, between items or
                               spinning, each holding a CPU (spin.h's "busy") */
    _Atomic unsigned spin_credit; /* spins the loop may count on instead of a wake */
    _Atomic bool dozing; /* the loop sleeps with a bound and drains after it: no reply wakes it */
    _Atomic bool quit;

    /* The loop thread's. */
    alignas(EVLOOP_CACHELINE) uint64_t tail;
    struct item **blocks;
    uint32_t nblocks;
    struct item *free_items;
    struct item *cancelled, *cancelled_tail; /* done(-ECANCELED) to run, in cancel order */
    struct evloop__taskq overflow;           /* items (arg) waiting for room, in order */
    unsigned unwoken; /* items published whose wake waits for evloop__work_flush() */
    uint64_t replies_at;  /* clock ns of the last tick that found replies */
    int64_t reply_gap_ns; /* the average time between two replies lately; 0: unknown */
    bool stopped;
    _Atomic uint64_t submitted, completed, ncancelled, pending, wakes, overflows, dozes;
};

/* ---- the ring ------------------------------------------------------------------------- */

/* Loop thread. False when full. */
static bool ring_push(struct evloop__work_pool *p, struct item *it)
{
    struct slot *s = &p->ring[p->tail & p->mask];
    /* acquire: pairs with the release in ring_pop(), which read the slot's last item. */
    if (atomic_load_explicit(&s->seq, memory_order_acquire) != p->tail)
        return false;
    s->item = it;
    /* release: publishes the item and its fields; pairs with the acquire in ring_pop(). */
    atomic_store_explicit(&s->seq, p->tail + 1, memory_order_release);
    p->tail++;
    return true;
}

static bool ring_has_room(struct evloop__work_pool *p)
{
    return atomic_load_explicit(&p->ring[p->tail & p->mask].seq, memory_order_acquire) == p->tail;
}

/* Loop thread: half the queue is free, so a refill from the overflow is worth a tick of
 * its own. Not every free slot: the loop would stay awake for each item a pool thread takes,
 * while the half still queued keeps the pool threads busy until the next reply. */
static bool ring_wants_refill(struct evloop__work_pool *p)
{
    uint64_t pos = p->tail + (p->mask + 1) / 2 - 1;
    return atomic_load_explicit(&p->ring[pos & p->mask].seq, memory_order_acquire) == pos;
}

/* Any pool thread. NULL when empty. */
static struct item *ring_pop(struct evloop__work_pool *p)
{
    uint64_t h = atomic_load_explicit(&p->head, memory_order_relaxed);
    for (;;) {
        struct slot *s = &p->ring[h & p->mask];
        /* acquire: pairs with the release store in ring_push(). */
        uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
        int64_t d = (int64_t)(seq - (h + 1));
        if (d < 0)
            return NULL;
        if (d > 0) {
            h = atomic_load_explicit(&p->head, memory_order_relaxed);
            continue;
        }
        /* relaxed: the slot's seq carries the item; head only hands out positions. */
        if (atomic_compare_exchange_weak_explicit(&p->head, &h, h + 1, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            struct item *it = s->item;
            /* release: the read of item above happens before the loop's next push here. */
            atomic_store_explicit(&s->seq, h + p->mask + 1, memory_order_release);
            return it;
        }
    }
}

/* Any pool thread: an item is waiting at the head (a hint for the spin; exact after the
 * fence of worker_sleep). */
static bool ring_has_item(struct evloop__work_pool *p)
{
    uint64_t h = atomic_load_explicit(&p->head, memory_order_relaxed);
    for (;;) {
        uint64_t seq = atomic_load_explicit(&p->ring[h & p->mask].seq, memory_order_acquire);
        int64_t d = (int64_t)(seq - (h + 1));
        if (d <= 0)
            return d == 0;
        h = atomic_load_explicit(&p->head, memory_order_relaxed); /* taken meanwhile */
    }
}

/* ---- pool threads ------------------------------------------------------------------------ */

static void reply_ran(void *item);
static void reply_skipped(void *item);

/* Hands an item back to the loop thread through the completion queue, then wakes the loop
 * if it announced sleep, as any producer does (sleep.h). The queue is never closed (a stop
 * waits for the replies); a push that finds no memory is tried again, never dropped. */
static void reply(struct evloop__work_pool *p, evloop_cb kind, struct item *it)
{
    int r;
    while ((r = evloop__ingress_push(p->replies, kind, it)) < 0) {
        struct timespec ts = evloop__ns_to_timespec(PUSH_RETRY_NS);
        nanosleep(&ts, NULL);
    }
    if (r == EVLOOP__PUSHED_NOTIFY && evloop__sleep_notify_unless(&p->loop->sleep, &p->dozing))
        evloop__ingress_woke(p->replies);
}

static void run_item(struct evloop__work_pool *p, struct item *it)
{
    uint32_t want = QUEUED;
    /* seq_cst: against the loop's CAS in evloop_work_cancel() and the stop sweep: exactly
     * one of them moves the item out of QUEUED. */
    if (!atomic_compare_exchange_strong(&it->state, &want, RUNNING)) {
        reply(p, reply_skipped, it);
        return;
    }
    it->work(it->arg);
    /* release: what work wrote is visible to a cancel that reads FINISHED (and the reply,
     * through the queue, orders it for the done callback). */
    atomic_store_explicit(&it->state, FINISHED, memory_order_release);
    reply(p, reply_ran, it);
}

/* Takes one of the pool's spinning places (at most max_spinners threads spin at once, so an
 * idle pool keeps at most a quarter of the CPUs busy). */
static bool spin_enter(struct evloop__work_pool *p)
{
    unsigned n = atomic_load_explicit(&p->spinning, memory_order_relaxed);
    do {
        if (n >= p->max_spinners)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(&p->spinning, &n, n + 1, memory_order_relaxed,
                                                    memory_order_relaxed));
    return true;
}

/* Takes one spin credit if there is one. seq_cst: for the loop, after its fence (see
 * wake_workers()); for a pool thread, before its sleep's announce and fence. */
static bool take_credit(struct evloop__work_pool *p)
{
    unsigned n = atomic_load(&p->spin_credit);
    while (n > 0)
        if (atomic_compare_exchange_weak(&p->spin_credit, &n, n - 1))
            return true;
    return false;
}

/* Spins up to the window watching the ring's head: an item that lands meanwhile costs no
 * syscall on either side. The policy (spin.h) decides whether and how long: never while the
 * other awake pool threads and an awake loop fill the CPUs. While it spins, the
 * thread holds a spin credit, which the loop may take instead of waking a sleeping thread
 * for an item (a wake the spinner would make useless, and on a small machine a thread that
 * competes with the spinner and the loop for a CPU). The spinner takes a credit back before
 * it can sleep: the credits left always stand for threads that will look at the ring again
 * after the loop took one (tests/model/work.pml, -DSPIN). */
static bool spin_for_item(struct evloop__work_pool *p, struct worker *w)
{
    if (!p->multi_cpu)
        return false;
    uint64_t last = evloop__clock_ns();
    int64_t window = evloop__spin_begin(&w->spin, last, -1);
    if (window <= 0 || !spin_enter(p))
        return false;
    unsigned busy = atomic_load_explicit(&p->awake, memory_order_relaxed) - 1 +
                    (atomic_load_explicit(&p->loop->phase, memory_order_relaxed) != EVLOOP_SLEEPING);
    if (!evloop__spin_room(busy, p->shared_cpus)) {
        atomic_fetch_sub_explicit(&p->spinning, 1, memory_order_relaxed);
        return false;
    }
    atomic_fetch_add(&p->spin_credit, 1);
    uint64_t end = last + (uint64_t)window;
    bool hit = false, preempted = false;
    for (unsigned i = 1;; i++) {
        if (ring_has_item(p) || atomic_load_explicit(&p->quit, memory_order_relaxed)) {
            hit = true;
            break;
        }
        evloop__cpu_relax();
        if ((i & 31) == 0) {
            uint64_t now = evloop__clock_ns();
            if (evloop__spin_lost_cpu(&w->spin, last, now)) {
                preempted = true;
                break;
            }
            last = now;
            if (now >= end)
                break;
        }
    }
    /* Ours, or another spinner's: either way a thread that has not yet taken its credit back
     * looks at the ring again (a taken credit was counted on after the item's publication). */
    (void)take_credit(p);
    atomic_fetch_sub_explicit(&p->spinning, 1, memory_order_relaxed);
    if (hit)
        atomic_fetch_add_explicit(&w->spin_hits, 1, memory_order_relaxed);
    if (!preempted)
        evloop__spin_end(&w->spin, hit);
    return hit;
}

/* The pool thread's half of the sleep protocol, the loop's prepare_sleep() in small: announce
 * (word ASLEEP, idle bit), fence, re-check the ring and quit, block on the word. */
static void worker_sleep(struct evloop__work_pool *p, struct worker *w)
{
    _Atomic uint64_t *bits = &p->idle[w->id / 64];
    uint64_t bit = UINT64_C(1) << (w->id % 64);
    atomic_store_explicit(&w->word, ASLEEP, memory_order_relaxed);
    atomic_fetch_or_explicit(bits, bit, memory_order_relaxed);
    /* seq_cst: pairs with the fence in wake_workers(): either the re-check below sees the
     * item the loop published before its fence, or the loop sees this bit and this word. */
    evloop__fence();
    uint64_t start = 0;
    if (!ring_has_item(p) && !atomic_load_explicit(&p->quit, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&w->sleeps, 1, memory_order_relaxed);
        start = evloop__clock_ns();
        atomic_fetch_sub_explicit(&p->awake, 1, memory_order_relaxed);
        evloop__waker_wait(w->waker, &w->word, ASLEEP, -1);
        atomic_fetch_add_explicit(&p->awake, 1, memory_order_relaxed);
    }
    atomic_fetch_and_explicit(bits, ~bit, memory_order_relaxed);
    /* seq_cst: against the loop's exchange; AWAKE here means the loop flipped it. */
    bool woken = atomic_exchange(&w->word, AWAKE) == AWAKE;
    if (start)
        evloop__spin_slept(&w->spin, woken ? (int64_t)(evloop__clock_ns() - start) : -1);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct evloop__work_pool *p = w->pool;
    atomic_fetch_add_explicit(&p->awake, 1, memory_order_relaxed);
    for (;;) {
        struct item *it = ring_pop(p);
        if (it) {
            run_item(p, it);
            continue;
        }
        /* acquire: pairs with the store in evloop__work_destroy(). */
        if (atomic_load_explicit(&p->quit, memory_order_acquire)) {
            atomic_fetch_sub_explicit(&p->awake, 1, memory_order_relaxed);
            return NULL;
        }
        if (!spin_for_item(p, w))
            worker_sleep(p, w);
    }
}

/* ---- the loop's half ------------------------------------------------------------------------ */

/* Loop thread: whether the pool threads with work (awake and not spinning: in an item or
 * between two) leave the loop a CPU to spin on (spin.h). Where they do not, the spin would
 * take the CPU from an item, and the completions it waits for come later for it. */
bool evloop__work_leaves_room(evloop *loop)
{
    struct evloop__work_pool *p = atomic_load_explicit(&loop->work, memory_order_relaxed);
    if (!p || !p->started)
        return true;
    /* Two relaxed reads: a thread that woke and began to spin between them may show in
     * spinning and not yet in awake. */
    unsigned awake = atomic_load_explicit(&p->awake, memory_order_relaxed);
    unsigned spinning = atomic_load_explicit(&p->spinning, memory_order_relaxed);
    return evloop__spin_room(awake > spinning ? awake - spinning : 0, p->shared_cpus);
}

/* After the loop published n items: wakes up to n sleeping pool threads, less one for each
 * spin credit it takes (a spinning thread sees the item, or re-checks the ring before it
 * sleeps). The fence orders the publications before the credits and the reads of the idle
 * bits and words (worker_sleep() says why); a pool thread found awake will re-check the
 * ring before it sleeps, so it is skipped. */
static void wake_workers(struct evloop__work_pool *p, unsigned n)
{
    evloop__fence();
    while (n > 0 && take_credit(p))
        n--;
    for (unsigned wi = 0; wi < p->nwords && n > 0; wi++) {
        uint64_t m = atomic_load_explicit(&p->idle[wi], memory_order_relaxed);
        while (m && n > 0) {
            unsigned b = (unsigned)__builtin_ctzll(m);
            m &= m - 1;
            /* Claim the bit (a hint): the next wake looks at another pool thread. */
            atomic_fetch_and_explicit(&p->idle[wi], ~(UINT64_C(1) << b), memory_order_relaxed);
            struct worker *w = &p->workers[wi * 64 + b];
            if (atomic_load_explicit(&w->word, memory_order_relaxed) != ASLEEP ||
                atomic_exchange(&w->word, AWAKE) != ASLEEP)
                continue;
            evloop__count(&p->wakes, 1);
            evloop__waker_wake(w->waker, &w->word);
            n--;
        }
    }
}

/* After the loop published n items. When the pool threads and the loop have one CPU between
 * them (!multi_cpu), a pool thread woken now would preempt the loop on its way out of the
 * wake call, run its one item and sleep again: while the loop runs (a callback, a hook, the
 * tick's own step), the wakes wait instead for evloop__work_flush(), which the tick calls
 * before it polls or sleeps and evloop_run_once before it returns, and are made there at
 * once, as one wake_workers() call. A submit while no thread runs the loop, or to a pool
 * with a CPU besides the loop's, wakes now. */
static void wake_for(struct evloop__work_pool *p, unsigned n)
{
    /* relaxed: the caller is the loop thread, which stored true itself (evloop__enter), or
     * the one thread allowed while none runs the loop (check_caller() read it). */
    if (!p->multi_cpu && atomic_load_explicit(&p->loop->running, memory_order_relaxed)) {
        p->unwoken += n;
        return;
    }
    wake_workers(p, n);
}

void evloop__work_flush(evloop *loop)
{
    struct evloop__work_pool *p = atomic_load_explicit(&loop->work, memory_order_relaxed);
    if (!p || p->unwoken == 0)
        return;
    unsigned n = p->unwoken;
    p->unwoken = 0;
    wake_workers(p, n);
}

static struct item *item_at(struct evloop__work_pool *p, uint32_t index)
{
    return &p->blocks[index / BLOCK_ITEMS][index % BLOCK_ITEMS];
}

static int grow_items(struct evloop__work_pool *p)
{
    if (p->nblocks >= UINT32_MAX / BLOCK_ITEMS)
        return -ENOMEM;
    struct item **blocks = realloc(p->blocks, (p->nblocks + 1) * sizeof(*blocks));
    if (!blocks)
        return -ENOMEM;
    p->blocks = blocks;
    struct item *b = malloc(BLOCK_ITEMS * sizeof(*b)); /* each item is set when it is used */
    if (!b)
        return -ENOMEM;
    for (uint32_t i = 0; i < BLOCK_ITEMS; i++) {
        atomic_init(&b[i].state, CANCELLED);
        b[i].pool = p;
        b[i].gen = 0;
        b[i].live = false;
        b[i].index = p->nblocks * BLOCK_ITEMS + i;
        b[i].next = i + 1 < BLOCK_ITEMS ? &b[i + 1] : p->free_items;
    }
    p->blocks[p->nblocks++] = b;
    p->free_items = b;
    return 0;
}

static struct item *item_new(struct evloop__work_pool *p)
{
    if (!p->free_items && grow_items(p) < 0)
        return NULL;
    struct item *it = p->free_items;
    p->free_items = it->next;
    it->gen = it->gen + 1 ? it->gen + 1 : 1; /* never 0: an id is never 0 */
    return it;
}

static void item_unref(struct evloop__work_pool *p, struct item *it)
{
    if (--it->refs == 0) {
        it->next = p->free_items;
        p->free_items = it;
    }
}

/* Runs done(arg, status) as a task runs: followed by the microtasks it queued. */
static void deliver(struct evloop__work_pool *p, struct item *it, int status)
{
    evloop *loop = p->loop;
    evloop_work_done_cb done = it->done;
    void *arg = it->arg;
    it->live = false;
    atomic_store_explicit(&p->pending, atomic_load_explicit(&p->pending, memory_order_relaxed) - 1,
                          memory_order_relaxed);
    evloop__count(status == 0 ? &p->completed : &p->ncancelled, 1);
    item_unref(p, it);
    if (!done)
        return;
    done(arg, status);
    /* The loop's own microtasks after each callback; those queued from other threads once
     * per batch of replies (evloop__work_run), as evloop__run_tasks does. */
    if (!evloop__taskq_is_empty(&loop->micro))
        evloop__drain_microtasks(loop);
    evloop__count(&loop->stats.tasks_run, 1);
}

static void reply_ran(void *item)
{
    struct item *it = item;
    item_unref(it->pool, it); /* its place in the queue */
    deliver(it->pool, it, 0);
}

static void reply_skipped(void *item)
{
    struct item *it = item;
    item_unref(it->pool, it); /* cancelled: its done ran or will run from the cancelled list */
}

static void cancel_item(struct evloop__work_pool *p, struct item *it)
{
    it->next = NULL;
    if (p->cancelled_tail)
        p->cancelled_tail->next = it;
    else
        p->cancelled = it;
    p->cancelled_tail = it;
}

/* Loop thread: QUEUED -> CANCELLED, against a pool thread's claim (run_item()). */
static bool try_cancel(struct evloop__work_pool *p, struct item *it)
{
    uint32_t want = QUEUED;
    if (!atomic_compare_exchange_strong(&it->state, &want, CANCELLED))
        return false;
    cancel_item(p, it);
    return true;
}

/* Moves what fits of the overflow into the ring, oldest first, and wakes pool threads for
 * it. Cancelled items leave the overflow here. */
static void refill(struct evloop__work_pool *p)
{
    unsigned pushed = 0;
    struct evloop_task t;
    while (ring_has_room(p) && evloop__taskq_pop(&p->overflow, &t)) {
        struct item *it = t.arg;
        if (atomic_load_explicit(&it->state, memory_order_relaxed) != QUEUED) {
            item_unref(p, it); /* cancelled while it waited here */
            continue;
        }
        ring_push(p, it);
        pushed++;
    }
    if (pushed)
        wake_for(p, pushed);
}

/* The pace of replies, for the doze: a moving average of the time between two, over ticks
 * that found some. After a quiet spell the pace is unknown again. */
static void note_replies(struct evloop__work_pool *p, uint64_t now, unsigned n)
{
    if (p->replies_at && now > p->replies_at && now - p->replies_at < 4 * DOZE_MAX_NS) {
        int64_t gap = (int64_t)(now - p->replies_at) / n;
        p->reply_gap_ns = p->reply_gap_ns ? (p->reply_gap_ns * 7 + gap) / 8 : gap;
    } else {
        p->reply_gap_ns = 0;
    }
    p->replies_at = now;
}

int64_t evloop__work_doze(evloop *loop, int64_t timeout_ns)
{
    struct evloop__work_pool *p = atomic_load_explicit(&loop->work, memory_order_relaxed);
    if (!p || !p->started || p->reply_gap_ns <= 0 || evloop__work_leaves_room(loop))
        return timeout_ns;
    uint64_t queued = p->tail - atomic_load_explicit(&p->head, memory_order_relaxed);
    int64_t d = queued / 2 > (uint64_t)(DOZE_MAX_NS / p->reply_gap_ns)
                    ? DOZE_MAX_NS
                    : p->reply_gap_ns * (int64_t)(queued / 2);
    if (d < DOZE_MIN_NS || (timeout_ns >= 0 && timeout_ns <= d))
        return timeout_ns;
    atomic_store_explicit(&p->dozing, true, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->dozes, 1, memory_order_relaxed);
    return d;
}

void evloop__work_doze_end(evloop *loop)
{
    struct evloop__work_pool *p = atomic_load_explicit(&loop->work, memory_order_relaxed);
    if (p && atomic_load_explicit(&p->dozing, memory_order_relaxed))
        atomic_store_explicit(&p->dozing, false, memory_order_relaxed);
}

void evloop__work_run(evloop *loop)
{
    struct evloop__work_pool *p = atomic_load_explicit(&loop->work, memory_order_relaxed);
    if (!p)
        return;
    struct evloop_task batch[EVLOOP__DRAIN_CHUNK];
    size_t n;
    unsigned done = 0;
    for (; done < REPLY_BUDGET; done += (unsigned)n) {
        n = evloop__ingress_drain(p->replies, batch, EVLOOP__DRAIN_CHUNK);
        if (n == 0)
            break;
        for (size_t i = 0; i < n; i++)
            batch[i].cb(batch[i].arg);
        evloop__drain_microtasks(loop);
    }
    if (done)
        note_replies(p, loop->now, done);
    /* A done callback may cancel more: they join the list and run here too. */
    while (p->cancelled) {
        struct item *it = p->cancelled;
        p->cancelled = it->next;
        if (!p->cancelled)
            p->cancelled_tail = NULL;
        deliver(p, it, -ECANCELED);
    }
    refill(p);
}

bool evloop__work_ready_slow(struct evloop__work_pool *p)
{
    return p->cancelled || !evloop__ingress_is_empty(p->replies) ||
           (!evloop__taskq_is_empty(&p->overflow) && ring_wants_refill(p));
}

uint64_t evloop__work_pending_slow(const struct evloop__work_pool *p)
{
    return atomic_load_explicit(&p->pending, memory_order_relaxed);
}

struct evloop__ingress *evloop__work_queue_slow(struct evloop__work_pool *p)
{
    return p->replies;
}

/* Cancels every item no pool thread has taken, in queue order: the ring from the consumers'
 * head (a position before it was taken, and its item runs), then the overflow. The loop is
 * the ring's only writer, so reading its slots races with nothing; an item found twice (a
 * slot behind the head that still names a reused item) is cancelled once, by the CAS. */
void evloop__work_stop(evloop *loop)
{
    struct evloop__work_pool *p = atomic_load_explicit(&loop->work, memory_order_relaxed);
    if (!p || p->stopped)
        return;
    p->stopped = true;
    for (uint64_t pos = atomic_load(&p->head); pos < p->tail; pos++)
        try_cancel(p, p->ring[pos & p->mask].item);
    struct evloop__taskq *q = &p->overflow;
    for (uint32_t i = q->head; i != q->tail; i++)
        try_cancel(p, q->buf[i & q->mask].arg);
}

/* ---- making, starting and ending the pool ------------------------------------------------ */

static unsigned default_threads(long cpus)
{
    long n = cpus - 1; /* one CPU for the loop thread */
    if (n < 2)
        n = 2; /* one long item must not hold up the rest */
    return n > THREADS_DEFAULT_MAX ? THREADS_DEFAULT_MAX : (unsigned)n;
}

EVLOOP_API void evloop_work_config_init(struct evloop_work_config *cfg)
{
    if (cfg)
        *cfg = (struct evloop_work_config){.threads = default_threads(evloop__usable_cpus()),
                                           .spin_ns = -1,
                                           .cpus = NULL,
                                           .ncpus = 0};
}

static void notify_loop(void *loop)
{
    evloop__sleep_notify(&((evloop *)loop)->sleep);
}

static void pool_free(struct evloop__work_pool *p)
{
    for (unsigned i = 0; p->workers && i < p->nthreads; i++)
        evloop__waker_free(p->workers[i].waker);
    free(p->workers);
    evloop__ingress_free(p->replies);
    for (uint32_t i = 0; i < p->nblocks; i++)
        free(p->blocks[i]);
    free(p->blocks);
    evloop__taskq_destroy(&p->overflow);
    free(p->ring);
    free(p->cpus);
    free(p);
}

static int pool_new(evloop *loop, struct evloop__work_pool **out)
{
    struct evloop__work_pool *p = aligned_alloc(EVLOOP_CACHELINE, sizeof(*p));
    if (!p)
        return -ENOMEM;
    memset(p, 0, sizeof(*p));
    p->loop = loop;
    p->mask = RING_SIZE - 1;
    p->ring = aligned_alloc(EVLOOP_CACHELINE, RING_SIZE * sizeof(*p->ring));
    int r = p->ring ? 0 : -ENOMEM;
    if (r == 0)
        r = evloop__taskq_init(&p->overflow, 64);
    if (r == 0)
        r = evloop__ingress_new(&p->replies, REPLY_CAPACITY, loop->sleep.fence, &loop->sleep.word,
                                notify_loop, loop);
    if (r < 0) {
        pool_free(p);
        return r;
    }
    for (uint64_t i = 0; i < RING_SIZE; i++) {
        atomic_init(&p->ring[i].seq, i);
        p->ring[i].item = NULL;
    }
    p->nthreads = default_threads(evloop__usable_cpus());
    p->spin_adaptive = true;
    /* release: evloop_work_stats on another thread reads the pool it finds. */
    atomic_store_explicit(&loop->work, p, memory_order_release);
    *out = p;
    return 0;
}

/* The loop thread's calls, or any one thread's while no thread runs the loop (as hooks). */
static int check_caller(evloop *loop)
{
    if (atomic_load(&loop->running) && !evloop__on_loop_thread(loop))
        return -EBUSY;
    /* acquire: pairs with the seq_cst exchange of stopping in evloop__stop(). */
    if (atomic_load_explicit(&loop->stopping, memory_order_acquire))
        return -ESHUTDOWN;
    return 0;
}

static int get_pool(evloop *loop, struct evloop__work_pool **out)
{
    *out = atomic_load_explicit(&loop->work, memory_order_relaxed);
    return *out ? 0 : pool_new(loop, out);
}

static int start_worker(struct evloop__work_pool *p, struct worker *w)
{
    pthread_attr_t attr;
    int r = pthread_attr_init(&attr);
    if (r != 0)
        return -r;
#ifdef __linux__
    if (p->ncpus > 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(p->cpus[w->id % p->ncpus], &set);
        r = pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
    }
#endif
    if (r == 0)
        r = pthread_create(&w->thread, &attr, worker_main, w);
    pthread_attr_destroy(&attr);
    return -r;
}

/* The CPUs the pool threads and the loop have between them: the placement's cpus (or, without
 * one, the mask the pool threads inherit) and the mask of the thread that starts them, which
 * is the loop thread, or the one thread that submits while none runs the loop. A pool thread
 * that spins on the loop's only CPU takes it from the loop, however many CPUs the pool
 * threads are given elsewhere; pool threads on other CPUs than the loop's may spin even when
 * the loop has one. */
static long pool_cpus(const struct evloop__work_pool *p)
{
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        for (unsigned i = 0; i < p->ncpus; i++)
            CPU_SET(p->cpus[i], &set);
        return CPU_COUNT(&set);
    }
#endif
    (void)p;
    return evloop__usable_cpus();
}

/* Starts the pool threads, with every signal blocked (they inherit the mask): a signal for
 * the process is never delivered to a pool thread in the middle of someone's work. At least
 * one must start; fewer than asked is kept (the pool is just smaller). */
static int start_pool(struct evloop__work_pool *p)
{
    p->workers = aligned_alloc(EVLOOP_CACHELINE, p->nthreads * sizeof(*p->workers));
    if (!p->workers)
        return -ENOMEM;
    memset(p->workers, 0, p->nthreads * sizeof(*p->workers));
    long cpus = pool_cpus(p);
    p->shared_cpus = cpus;
    p->multi_cpu = cpus > 1;
    p->max_spinners = cpus >= 8 ? (unsigned)(cpus / 4) : 1;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int r = 0;
    unsigned n = 0;
    for (; n < p->nthreads; n++) {
        struct worker *w = &p->workers[n];
        w->pool = p;
        w->id = n;
        evloop__spin_init(&w->spin, p->spin_adaptive ? SPIN_START_NS : p->spin_fixed,
                          SPIN_CAP_NS, p->spin_adaptive);
        atomic_init(&w->word, AWAKE);
        if ((r = evloop__waker_new(&w->waker)) < 0 || (r = start_worker(p, w)) < 0) {
            evloop__waker_free(w->waker);
            w->waker = NULL;
            break;
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (n == 0) {
        free(p->workers);
        p->workers = NULL;
        return r;
    }
    p->nthreads = n;
    p->nwords = (n + 63) / 64;
    p->started = true;
    /* release: evloop_work_stats reads the workers after it reads the count. */
    atomic_store_explicit(&p->threads_started, n, memory_order_release);
    return 0;
}

EVLOOP_API int evloop_work_configure(evloop *loop, const struct evloop_work_config *cfg)
{
    if (!loop || !cfg || cfg->threads == 0 || cfg->threads > EVLOOP_WORK_THREADS_MAX ||
        cfg->spin_ns < -1 || cfg->spin_ns > EVLOOP_WORK_SPIN_MAX_NS || (cfg->ncpus && !cfg->cpus))
        return -EINVAL;
    for (unsigned i = 0; i < cfg->ncpus; i++)
        if (cfg->cpus[i] < 0 || cfg->cpus[i] >= EVLOOP__MAX_CPUS)
            return -EINVAL;
#ifndef __linux__
    if (cfg->ncpus)
        return -ENOTSUP;
#endif
    int r = check_caller(loop);
    if (r < 0)
        return r;
    struct evloop__work_pool *p;
    if ((r = get_pool(loop, &p)) < 0)
        return r;
    if (p->started)
        return -EBUSY;
    int *cpus = NULL;
    if (cfg->ncpus) {
        cpus = malloc(cfg->ncpus * sizeof(*cpus));
        if (!cpus)
            return -ENOMEM;
        memcpy(cpus, cfg->cpus, cfg->ncpus * sizeof(*cpus));
    }
    free(p->cpus);
    p->cpus = cpus;
    p->ncpus = cfg->ncpus;
    p->nthreads = cfg->threads;
    p->spin_adaptive = cfg->spin_ns < 0;
    p->spin_fixed = cfg->spin_ns < 0 ? 0 : cfg->spin_ns;
    return 0;
}

/* Into the queue, behind whatever waits in the overflow (items start in submit order). */
static int enqueue(struct evloop__work_pool *p, struct item *it)
{
    if (evloop__taskq_is_empty(&p->overflow) && ring_push(p, it)) {
        wake_for(p, 1);
        return 0;
    }
    int r = evloop__taskq_push(&p->overflow, NULL, it);
    if (r == 0) {
        evloop__count(&p->overflows, 1);
        refill(p);
    }
    return r;
}

EVLOOP_API int evloop_work_submit(evloop *loop, evloop_cb work, evloop_work_done_cb done, void *arg,
                                  evloop_work_id *out)
{
    if (!loop || !work)
        return -EINVAL;
    int r = check_caller(loop);
    struct evloop__work_pool *p;
    if (r < 0 || (r = get_pool(loop, &p)) < 0 || (!p->started && (r = start_pool(p)) < 0))
        return r;
    struct item *it = item_new(p);
    if (!it)
        return -ENOMEM;
    it->work = work;
    it->done = done;
    it->arg = arg;
    it->refs = 2;
    it->live = true;
    /* relaxed: ring_push()'s release store publishes it with the item. */
    atomic_store_explicit(&it->state, QUEUED, memory_order_relaxed);
    if ((r = enqueue(p, it)) < 0) {
        it->live = false;
        it->refs = 1;
        item_unref(p, it);
        return r;
    }
    evloop__count(&p->submitted, 1);
    evloop__count(&p->pending, 1);
    if (out)
        *out = (uint64_t)it->gen << 32 | it->index;
    return 0;
}

EVLOOP_API int evloop_work_cancel(evloop *loop, evloop_work_id id)
{
    if (!loop)
        return -EINVAL;
    if (atomic_load(&loop->running) && !evloop__on_loop_thread(loop))
        return -EBUSY;
    struct evloop__work_pool *p = atomic_load_explicit(&loop->work, memory_order_relaxed);
    uint32_t index = (uint32_t)id, gen = (uint32_t)(id >> 32);
    if (!p || gen == 0 || index / BLOCK_ITEMS >= p->nblocks)
        return -ENOENT;
    struct item *it = item_at(p, index);
    if (it->gen != gen || !it->live)
        return -ENOENT;
    if (try_cancel(p, it))
        return 0;
    /* acquire: pairs with the release store of FINISHED in run_item(). */
    uint32_t state = atomic_load_explicit(&it->state, memory_order_acquire);
    return state == RUNNING ? -EBUSY : -EALREADY;
}

EVLOOP_API int evloop_work_stats(const evloop *loop, struct evloop_work_stats *out)
{
    if (!loop || !out)
        return -EINVAL;
    *out = (struct evloop_work_stats){0};
    /* acquire: pairs with the release store in pool_new(). */
    struct evloop__work_pool *p = atomic_load_explicit(&loop->work, memory_order_acquire);
    if (!p)
        return 0;
    unsigned n = atomic_load_explicit(&p->threads_started, memory_order_acquire);
    out->threads = n;
    out->submitted = atomic_load_explicit(&p->submitted, memory_order_relaxed);
    out->completed = atomic_load_explicit(&p->completed, memory_order_relaxed);
    out->cancelled = atomic_load_explicit(&p->ncancelled, memory_order_relaxed);
    out->pending = atomic_load_explicit(&p->pending, memory_order_relaxed);
    out->wakes = atomic_load_explicit(&p->wakes, memory_order_relaxed);
    out->overflows = atomic_load_explicit(&p->overflows, memory_order_relaxed);
    out->loop_dozes = atomic_load_explicit(&p->dozes, memory_order_relaxed);
    for (unsigned i = 0; i < n; i++) {
        out->sleeps += atomic_load_explicit(&p->workers[i].sleeps, memory_order_relaxed);
        out->spin_hits += atomic_load_explicit(&p->workers[i].spin_hits, memory_order_relaxed);
    }
    return 0;
}

/* lifecycle.c's destroy, first: the loop has terminated (every accepted item's done has
 * run), so the pool threads are idle or popping cancelled entries. quit, then every sleep
 * word flipped: a pool thread whose re-check missed quit had stored ASLEEP before its fence,
 * so the exchange sees it and wakes it. Their exit announces their reply lanes and notifies
 * the loop (arena.c), so this runs before the queues and the backend go. */
void evloop__work_destroy(evloop *loop)
{
    struct evloop__work_pool *p = atomic_load_explicit(&loop->work, memory_order_relaxed);
    if (!p)
        return;
    if (p->started) {
        /* seq_cst: pairs with the fence in worker_sleep() (see above). */
        atomic_store(&p->quit, true);
        for (unsigned i = 0; i < p->nthreads; i++)
            if (atomic_exchange(&p->workers[i].word, AWAKE) == ASLEEP)
                evloop__waker_wake(p->workers[i].waker, &p->workers[i].word);
        for (unsigned i = 0; i < p->nthreads; i++)
            pthread_join(p->workers[i].thread, NULL);
    }
    atomic_store_explicit(&loop->work, NULL, memory_order_relaxed);
    pool_free(p);
}
