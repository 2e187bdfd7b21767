/* Timers: a binary min-heap (by deadline, then start order) of slot indices over a slab
 * of timer slots, guarded by timer_lock so any thread may start or cancel. Ids carry a
 * per-slot generation, so a stale id never cancels a reused slot. Deadlines are taken
 * from a fresh CLOCK_MONOTONIC read, so a timer never fires early. Interval timers are
 * re-armed from their previous deadline, not from "now" (missed periods are skipped). Start and
 * cancel are O(log n) in the number of timers; the slab grows by doubling and is reused.
 * evloop_timer_again moves a live timer to a new deadline in place, O(log n). */
#include <stdlib.h>

#include "callback.h"
#include "release.h"
#include "timer.h"

#define NO_HEAP UINT32_MAX
#define NO_SLOT UINT32_MAX
#define DEADLINE_MAX (UINT64_MAX - 1)

static bool timer_before(const struct evloop__timer *a, const struct evloop__timer *b)
{
    return a->deadline < b->deadline || (a->deadline == b->deadline && a->order < b->order);
}

static void heap_set(evloop *loop, uint32_t pos, uint32_t slot)
{
    loop->heap[pos] = slot;
    loop->timers[slot].heap_idx = pos;
}

static void sift_up(evloop *loop, uint32_t pos)
{
    uint32_t slot = loop->heap[pos];
    while (pos > 0) {
        uint32_t parent = (pos - 1) / 2;
        if (!timer_before(&loop->timers[slot], &loop->timers[loop->heap[parent]]))
            break;
        heap_set(loop, pos, loop->heap[parent]);
        pos = parent;
    }
    heap_set(loop, pos, slot);
}

static void sift_down(evloop *loop, uint32_t pos)
{
    uint32_t slot = loop->heap[pos];
    for (;;) {
        uint32_t child = 2 * pos + 1;
        if (child >= loop->heap_len)
            break;
        if (child + 1 < loop->heap_len &&
            timer_before(&loop->timers[loop->heap[child + 1]], &loop->timers[loop->heap[child]]))
            child++;
        if (!timer_before(&loop->timers[loop->heap[child]], &loop->timers[slot]))
            break;
        heap_set(loop, pos, loop->heap[child]);
        pos = child;
    }
    heap_set(loop, pos, slot);
}

static void publish_next_deadline(evloop *loop)
{
    uint64_t next = loop->heap_len ? loop->timers[loop->heap[0]].deadline : UINT64_MAX;
    atomic_store_explicit(&loop->next_deadline, next, memory_order_relaxed);
}

static void heap_remove(evloop *loop, uint32_t pos)
{
    uint32_t last = loop->heap[--loop->heap_len];
    loop->timers[loop->heap[pos]].heap_idx = NO_HEAP;
    if (pos == loop->heap_len)
        return;
    heap_set(loop, pos, last);
    sift_down(loop, pos);
    sift_up(loop, loop->timers[last].heap_idx);
}

static void free_slot(evloop *loop, uint32_t slot)
{
    struct evloop__timer *t = &loop->timers[slot];
    t->gen = t->gen + 1 ? t->gen + 1 : 1;
    t->heap_idx = NO_HEAP;
    t->next_free = loop->free_timer;
    loop->free_timer = slot;
}

static int grow_timers(evloop *loop)
{
    uint32_t cap = loop->timers_cap ? loop->timers_cap * 2 : 64;
    if (cap <= loop->timers_cap)
        return -ENOMEM;
    struct evloop__timer *timers = realloc(loop->timers, cap * sizeof(*timers));
    if (!timers)
        return -ENOMEM;
    loop->timers = timers;
    uint32_t *heap = realloc(loop->heap, cap * sizeof(*heap));
    if (!heap)
        return -ENOMEM; /* the larger slab is kept; nothing else changed */
    loop->heap = heap;
    for (uint32_t i = cap; i-- > loop->timers_cap;) {
        timers[i] =
            (struct evloop__timer){.gen = 1, .heap_idx = NO_HEAP, .next_free = loop->free_timer};
        loop->free_timer = i;
    }
    loop->timers_cap = cap;
    return 0;
}

EVLOOP_API int evloop_timer_start(evloop *loop, uint64_t delay_ns, uint64_t interval_ns,
                                  evloop_cb cb, void *arg, evloop_timer_id *out)
{
    if (!loop || !cb)
        return -EINVAL;
    if (atomic_load_explicit(&loop->stopping, memory_order_relaxed))
        return -ESHUTDOWN;
    uint64_t now = evloop__clock_ns();
    /* Saturates below UINT64_MAX, which next_deadline uses for "no timer". */
    uint64_t deadline = delay_ns >= DEADLINE_MAX - now ? DEADLINE_MAX : now + delay_ns;
    pthread_mutex_lock(&loop->timer_lock);
    if (loop->free_timer == NO_SLOT || loop->timers_cap == 0) {
        int r = grow_timers(loop);
        if (r < 0) {
            pthread_mutex_unlock(&loop->timer_lock);
            return r;
        }
    }
    uint32_t slot = loop->free_timer;
    struct evloop__timer *t = &loop->timers[slot];
    loop->free_timer = t->next_free;
    t->deadline = deadline;
    t->interval = interval_ns;
    t->order = loop->timer_order++;
    t->cb = cb;
    t->arg = arg;
    loop->heap[loop->heap_len] = slot;
    sift_up(loop, loop->heap_len++);
    bool is_first = t->heap_idx == 0;
    publish_next_deadline(loop);
    evloop_timer_id id = (uint64_t)t->gen << 32 | slot;
    pthread_mutex_unlock(&loop->timer_lock);
    if (out)
        *out = id;
    /* A new earliest deadline must shorten a sleep already under way. */
    if (is_first && !evloop__on_loop_thread(loop))
        evloop__sleep_kick(&loop->sleep);
    return 0;
}

EVLOOP_API int evloop_timer_cancel(evloop *loop, evloop_timer_id id)
{
    if (!loop)
        return -EINVAL;
    uint32_t slot = (uint32_t)id, gen = (uint32_t)(id >> 32);
    int r = -ENOENT;
    pthread_mutex_lock(&loop->timer_lock);
    if (slot < loop->timers_cap && loop->timers[slot].gen == gen &&
        loop->timers[slot].heap_idx != NO_HEAP) {
        heap_remove(loop, loop->timers[slot].heap_idx);
        free_slot(loop, slot);
        publish_next_deadline(loop);
        r = 0;
    }
    pthread_mutex_unlock(&loop->timer_lock);
    return r;
}

EVLOOP_API int evloop_timer_again(evloop *loop, evloop_timer_id id, uint64_t delay_ns)
{
    if (!loop)
        return -EINVAL;
    if (atomic_load_explicit(&loop->stopping, memory_order_relaxed))
        return -ESHUTDOWN;
    uint64_t now = evloop__clock_ns();
    uint64_t deadline = delay_ns >= DEADLINE_MAX - now ? DEADLINE_MAX : now + delay_ns;
    uint32_t slot = (uint32_t)id, gen = (uint32_t)(id >> 32);
    int r = -ENOENT;
    bool is_first = false;
    pthread_mutex_lock(&loop->timer_lock);
    if (slot < loop->timers_cap && loop->timers[slot].gen == gen &&
        loop->timers[slot].heap_idx != NO_HEAP) {
        struct evloop__timer *t = &loop->timers[slot];
        t->deadline = deadline;
        t->order = loop->timer_order++; /* as a new start: after timers due at the same time */
        sift_down(loop, t->heap_idx);
        sift_up(loop, t->heap_idx);
        is_first = t->heap_idx == 0;
        publish_next_deadline(loop);
        r = 0;
    }
    pthread_mutex_unlock(&loop->timer_lock);
    /* As in evloop_timer_start: a new earliest deadline must shorten a sleep under way. */
    if (is_first && !evloop__on_loop_thread(loop))
        evloop__sleep_kick(&loop->sleep);
    return r;
}

/* The next deadline of an interval timer: on its grid (deadline + k * interval), the first
 * one after now. Periods the loop missed are skipped, not run back to back, so a tiny
 * interval cannot hold the loop in run_timers or starve other timers. */
static uint64_t next_period(const struct evloop__timer *t, uint64_t now)
{
    uint64_t missed = now >= t->deadline ? (now - t->deadline) / t->interval : 0;
    if (missed >= (DEADLINE_MAX - t->deadline) / t->interval)
        return DEADLINE_MAX;
    return t->deadline + (missed + 1) * t->interval;
}

/* Under timer_lock: takes the due timer at the top, if any, re-arming an interval one. */
static bool pop_due(evloop *loop, struct evloop_task *out)
{
    if (loop->heap_len == 0)
        return false;
    uint32_t slot = loop->heap[0];
    struct evloop__timer *t = &loop->timers[slot];
    if (t->deadline > loop->now)
        return false;
    *out = (struct evloop_task){t->cb, t->arg};
    if (t->interval) {
        t->deadline = next_period(t, loop->now);
        sift_down(loop, 0);
    } else {
        heap_remove(loop, 0);
        free_slot(loop, slot);
    }
    publish_next_deadline(loop);
    return true;
}

void evloop__run_timers(evloop *loop)
{
    if (atomic_load_explicit(&loop->next_deadline, memory_order_relaxed) > loop->now)
        return;
    for (;;) {
        struct evloop_task t;
        pthread_mutex_lock(&loop->timer_lock);
        bool due = pop_due(loop, &t);
        pthread_mutex_unlock(&loop->timer_lock);
        if (!due)
            break;
        t.cb(t.arg);
        evloop__count(&loop->stats.timers_fired, 1);
        evloop__drain_microtasks(loop);
    }
}

int64_t evloop__timer_timeout(evloop *loop, uint64_t now)
{
    uint64_t next = atomic_load_explicit(&loop->next_deadline, memory_order_relaxed);
    if (next == UINT64_MAX)
        return -1;
    return next <= now ? 0 : (int64_t)(next - now > INT64_MAX ? INT64_MAX : next - now);
}

bool evloop__has_timers(evloop *loop)
{
    return atomic_load_explicit(&loop->next_deadline, memory_order_relaxed) != UINT64_MAX;
}

/* At termination: every timer left is dropped, and its argument goes to the release
 * notification (release.c), called with the lock released: it may call any evloop_*. */
void evloop__release_timers(evloop *loop)
{
    for (;;) {
        pthread_mutex_lock(&loop->timer_lock);
        bool any = loop->heap_len > 0;
        void *arg = NULL;
        if (any) {
            uint32_t slot = loop->heap[0];
            arg = loop->timers[slot].arg;
            heap_remove(loop, 0);
            free_slot(loop, slot);
        }
        publish_next_deadline(loop);
        pthread_mutex_unlock(&loop->timer_lock);
        if (!any)
            return;
        evloop__released(loop, arg);
    }
}

void evloop__timers_init(evloop *loop)
{
    pthread_mutex_init(&loop->timer_lock, NULL);
    loop->free_timer = NO_SLOT;
    atomic_init(&loop->next_deadline, UINT64_MAX);
}

void evloop__timers_destroy(evloop *loop)
{
    free(loop->timers);
    free(loop->heap);
    loop->timers = NULL;
    loop->heap = NULL;
    pthread_mutex_destroy(&loop->timer_lock);
}
