/* libFuzzer target: an ingress variant driven by several producer threads against a model
 * of per-producer FIFOs. fuzz_ingress plays every producer on one thread, so it only ever
 * sees one lane; here K persistent threads (2..4) each own a lane, and the fuzzer's main
 * thread, the consumer, hands each of them one operation at a time and waits for it, so a
 * run is deterministic. Operations: a producer pushes one task or a batch, or exits (its
 * lane is orphaned: it must be drained, then reclaimed) and a fresh thread takes its place;
 * the consumer drains with a budget, checks emptiness (with or without the barrier step
 * the loop takes before sleeping), or closes the queue. Checks: each producer's tasks come
 * out in order, exactly once, a drain returns min(budget, queued), emptiness is exact, a
 * closed queue refuses, and once everything is drained no lane of an exited thread is left.
 *
 * Input: byte 0 picks the capacity, the fence mode and K; then one operation per byte. */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "barrier.h"
#include "ingress.h"

#define MAX_WORKERS 4
#define MAX_PRODUCERS 256 /* thread incarnations per input */
#define MAX_BATCH 40

enum op { OP_PUSH, OP_BATCH, OP_EXIT };

struct worker {
    pthread_t thread;
    sem_t go, done;
    enum op op;
    unsigned batch;
    unsigned id;   /* producer id of this incarnation */
    int result;
    bool pushed;   /* registered a lane */
};

static struct evloop__ingress *g_q;
static struct worker g_w[MAX_WORKERS];
static uint32_t g_sent[MAX_PRODUCERS];    /* tasks accepted per producer */
static uint32_t g_next[MAX_PRODUCERS];    /* next seq expected per producer */
static uint64_t g_queued;
static unsigned g_producers;

static void task(void *arg)
{
    (void)arg;
}

static void die(const char *what, long long a, long long b)
{
    fprintf(stderr, "fuzz_lanes(%s): %s (%lld vs %lld)\n", evloop__ingress_name(), what, a, b);
    abort();
}

/* _is_empty() with nothing pushed meanwhile: a lane it takes from the announce stack counts
 * as work once even when drained (an exited thread's lane, a lane its producer was still
 * announcing: ingress.h), so a "not empty" is asked again, and the second answer is exact. */
static bool is_empty_now(void)
{
    return evloop__ingress_is_empty(g_q) || evloop__ingress_is_empty(g_q);
}

/* sem_wait returns early with EINTR when a signal lands (libFuzzer's timers send some). */
static void wait_sem(sem_t *s)
{
    while (sem_wait(s) != 0)
        ;
}

static void *work(void *arg)
{
    struct worker *w = arg;
    for (;;) {
        wait_sem(&w->go);
        if (w->op == OP_EXIT) {
            sem_post(&w->done);
            return NULL; /* the lane's destructor runs as this thread ends */
        }
        struct evloop_task batch[MAX_BATCH];
        unsigned n = w->op == OP_PUSH ? 1 : w->batch;
        for (unsigned i = 0; i < n; i++)
            batch[i] = (struct evloop_task){
                task, (void *)(uintptr_t)((uint64_t)w->id << 32 | (g_sent[w->id] + i))};
        w->result = n == 1 ? evloop__ingress_push(g_q, batch[0].cb, batch[0].arg)
                           : evloop__ingress_push_batch(g_q, batch, n);
        w->pushed = true;
        sem_post(&w->done);
    }
}

static void spawn(struct worker *w)
{
    if (g_producers == MAX_PRODUCERS)
        die("too many incarnations", g_producers, MAX_PRODUCERS);
    w->id = g_producers++;
    w->pushed = false;
    if (pthread_create(&w->thread, NULL, work, w) != 0)
        die("pthread_create", 0, 0);
}

/* Runs one operation on worker w and waits for it (sem_post/sem_wait order everything). */
static void run(struct worker *w, enum op op, unsigned batch)
{
    w->op = op;
    w->batch = batch;
    sem_post(&w->go);
    wait_sem(&w->done);
    if (op == OP_EXIT) {
        pthread_join(w->thread, NULL);
        spawn(w);
    }
}

static void push(struct worker *w, unsigned n, bool closed)
{
    run(w, n == 1 ? OP_PUSH : OP_BATCH, n);
    if (closed) {
        if (w->result != -ESHUTDOWN)
            die("push after close did not return -ESHUTDOWN", w->result, -ESHUTDOWN);
        return;
    }
    /* No sleep word given: every accepted push asks for a notify (ingress.h). */
    if (w->result != EVLOOP__PUSHED_NOTIFY)
        die("push failed", w->result, EVLOOP__PUSHED_NOTIFY);
    g_sent[w->id] += n;
    g_queued += n;
}

static size_t drain(size_t max)
{
    struct evloop_task out[256];
    if (max > 256)
        max = 256;
    size_t n = evloop__ingress_drain(g_q, out, max);
    size_t want = g_queued < max ? (size_t)g_queued : max;
    if (n != want)
        die("drain returned a different count than min(max, queued)", (long long)n,
            (long long)want);
    for (size_t i = 0; i < n; i++) {
        uint64_t v = (uint64_t)(uintptr_t)out[i].arg;
        unsigned id = (unsigned)(v >> 32);
        uint32_t seq = (uint32_t)v;
        if (out[i].cb != task || id >= g_producers)
            die("a task nobody pushed", id, g_producers);
        if (seq != g_next[id] || seq >= g_sent[id])
            die("a producer's tasks out of order or twice", seq, g_next[id]);
        g_next[id]++;
    }
    g_queued -= n;
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint32_t capacity = 2 + (data[0] >> 3) * 8;
    unsigned fence = data[0] & 1 ? EVLOOP__FENCE_SEQ_CST : EVLOOP__FENCE_MEMBARRIER;
    unsigned k = 2 + (data[0] >> 1) % 3;
    if (evloop__ingress_new(&g_q, capacity, fence, NULL, NULL, NULL) != 0)
        die("new failed", capacity, 0);
    memset(g_sent, 0, sizeof g_sent);
    memset(g_next, 0, sizeof g_next);
    g_queued = 0;
    g_producers = 0;
    for (unsigned i = 0; i < k; i++) {
        sem_init(&g_w[i].go, 0, 0);
        sem_init(&g_w[i].done, 0, 0);
        spawn(&g_w[i]);
    }
    bool closed = false;
    for (size_t i = 1; i < size && g_producers < MAX_PRODUCERS - MAX_WORKERS; i++) {
        uint8_t b = data[i];
        struct worker *w = &g_w[(b >> 3) % k];
        switch (b & 7) {
        case 0:
        case 1:
            push(w, 1, closed);
            break;
        case 2:
            push(w, 2 + (b >> 5) * 5, closed); /* batches of 2..37: segments chain */
            break;
        case 3:
        case 4:
            drain((size_t)(b >> 3) * 9);
            break;
        case 5:
            if (b & 0x80) /* as the loop does after its heavy barrier */
                evloop__ingress_fenced(g_q);
            if (is_empty_now() != (g_queued == 0))
                die("is_empty disagrees with the model", is_empty_now(), (long long)g_queued);
            break;
        case 6:
            run(w, OP_EXIT, 0);
            break;
        case 7:
            if ((b & 0xf8) == 0xf8) {
                evloop__ingress_close(g_q);
                closed = true;
            } else {
                push(w, 1 + (b >> 3) % 3, closed);
            }
            break;
        }
    }
    while (g_queued > 0)
        if (drain(64) == 0)
            die("final drain stuck", (long long)g_queued, 0);
    for (unsigned i = 0; i < k; i++) { /* every thread exits: every lane is orphaned */
        g_w[i].op = OP_EXIT;
        sem_post(&g_w[i].go);
        wait_sem(&g_w[i].done);
        pthread_join(g_w[i].thread, NULL);
        sem_destroy(&g_w[i].go);
        sem_destroy(&g_w[i].done);
    }
    if (drain(4) != 0)
        die("drained from an empty queue", 1, 0);
    evloop__ingress_fenced(g_q);
    if (!is_empty_now())
        die("not empty after everything was drained", 0, 0);
    if (evloop__ingress_lanes(g_q) != 0)
        die("lanes of exited threads left after a drain", (long long)evloop__ingress_lanes(g_q),
            0);
    evloop__ingress_free(g_q);
    return 0;
}
