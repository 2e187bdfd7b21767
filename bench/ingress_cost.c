/* ingress_cost: what a push and a drain of each ingress variant cost with no other thread in
 * the way, the floor a flood's figure is measured against. One thread pushes BATCH tasks into
 * a queue, then drains them, ROUNDS times; the push half and the drain half are timed apart
 * with the thread's CPU clock (so a busy machine's preemption does not count), once per batch,
 * less the clock's own cost (a syscall: the "clock" line). Once with a queue in each barrier
 * mode the variant can be given. Everything a flood
 * adds to these figures is the other thread: cache lines that move between the producer's
 * CPU and the loop's, wakes, preemption.
 *
 *   ingress_cost [rounds=20000] [batch=64]
 *
 * Built once per variant (ingress_cost_arena, ingress_cost_chunk), against the variant's
 * library and its internal queue API (src/core/ingress.h). */
#define _GNU_SOURCE /* common.h, through ingress.h: sched_getaffinity */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ingress.h"

#define BATCH_MAX 4096

static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void task(void *arg)
{
    (void)arg;
}

static double clock_ns; /* one read of the thread CPU clock */

static int measure(enum evloop__fence fence, const char *mode, long rounds, int batch)
{
    struct evloop__ingress *q;
    _Atomic uint32_t word = 0; /* the loop awake, as in a flood */
    int r = evloop__ingress_new(&q, (uint32_t)batch * 2, fence, &word, NULL, NULL);
    if (r < 0) {
        fprintf(stderr, "ingress_cost: evloop__ingress_new: %d\n", r);
        return 1;
    }
    static struct evloop_task out[BATCH_MAX];
    uint64_t push = 0, drain = 0, tasks = 0;
    for (long i = 0; i < rounds; i++) {
        uint64_t t0 = cpu_ns();
        for (int k = 0; k < batch; k++)
            if (evloop__ingress_push(q, task, NULL) < 0) {
                fprintf(stderr, "ingress_cost: push refused\n");
                return 1;
            }
        uint64_t t1 = cpu_ns();
        size_t n = evloop__ingress_drain(q, out, (size_t)batch);
        uint64_t t2 = cpu_ns();
        if (n != (size_t)batch) {
            fprintf(stderr, "ingress_cost: drained %zu of %d\n", n, batch);
            return 1;
        }
        push += t1 - t0;
        drain += t2 - t1;
        tasks += n;
    }
    double clock_share = clock_ns * (double)rounds / (double)tasks;
    printf("%s %-10s push %5.1f ns/task  drain %5.1f ns/task  (%llu tasks, batches of %d)\n",
           evloop__ingress_name(), mode, (double)push / (double)tasks - clock_share,
           (double)drain / (double)tasks - clock_share, (unsigned long long)tasks, batch);
    evloop__ingress_free(q);
    return 0;
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 20000;
    int batch = argc > 2 ? atoi(argv[2]) : 64;
    if (rounds < 1 || batch < 1 || batch > BATCH_MAX) {
        fprintf(stderr, "usage: ingress_cost [rounds >= 1] [batch 1..%d]\n", BATCH_MAX);
        return 2;
    }
    clock_ns = 1e9; /* the least of 20 blocks of 100 reads: what the clock itself costs */
    for (int b = 0; b < 20; b++) {
        uint64_t t0 = cpu_ns();
        for (int i = 0; i < 100; i++)
            (void)cpu_ns();
        double per = (double)(cpu_ns() - t0) / 101.0;
        clock_ns = per < clock_ns ? per : clock_ns;
    }
    printf("clock %.1f ns per read of the thread CPU clock (taken off each figure)\n", clock_ns);
    /* membarrier mode: a push's light barrier is a compiler barrier (the arena build's
     * default); seq_cst: a fence (the chunk build's default, whose pushes take none). */
    return measure(EVLOOP__FENCE_MEMBARRIER, "membarrier", rounds, batch) |
           measure(EVLOOP__FENCE_SEQ_CST, "seq_cst", rounds, batch);
}
